// Public surface of the embedded MQTT broker.
export { createBroker, aedesBaseOptions } from './broker.js';
export type { Broker, BrokerOptions, BrokerStats, DataPlane, DataPlaneProperties, EnhancedAuthInfo } from './broker.js';
export type { AccessChange, MqttAccess, MqttCredentials, MqttPrincipal } from './mqtt-access.js';
