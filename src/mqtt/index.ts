// Public surface of the embedded MQTT broker.
export { createBroker, aedesBaseOptions } from './broker.js';
export type { Broker, BrokerAdmin, BrokerOptions, BrokerStats, DataPlane, DataPlaneProperties, MessageOrigin, EnhancedAuthInfo, TappedPublish, LiveClient, LiveClientDetail, Page, RetainedMessage, StoredSession } from './broker.js';
export type { AccessChange, MqttAccess, MqttCredentials, MqttPrincipal } from './mqtt-access.js';
