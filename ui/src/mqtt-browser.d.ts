// The part of mqtt.js's browser build (mqtt/dist/mqtt.esm.js) the topic explorer uses. Declared
// here so the UI's type check does not pull in the Node.js typings of the package's main entry.
declare module 'mqtt/dist/mqtt.esm' {
  export interface ClientOptions {
    username?: string;
    password?: string;
    clientId?: string;
    protocolVersion?: 4 | 5;
    clean?: boolean;
    keepalive?: number;
    connectTimeout?: number;
    reconnectPeriod?: number;
    resubscribe?: boolean;
    timerVariant?: 'auto' | 'worker' | 'native';
  }
  export interface Granted {
    topic: string;
    qos: number;
  }
  export interface PacketInfo {
    retain?: boolean;
    qos?: number;
  }
  export interface MqttClient {
    connected: boolean;
    on(event: 'connect', listener: () => void): this;
    on(event: 'close' | 'offline' | 'end', listener: () => void): this;
    on(event: 'error', listener: (error: Error & { code?: number }) => void): this;
    on(event: 'message', listener: (topic: string, payload: Uint8Array, packet: PacketInfo) => void): this;
    subscribe(filter: string, options: { qos: 0 | 1 }, callback: (error: Error | null, granted?: Granted[]) => void): this;
    publish(topic: string, payload: string, options: { qos: 0 | 1; retain: boolean }, callback: (error?: Error) => void): this;
    unsubscribe(filter: string, callback?: (error?: Error) => void): this;
    end(force?: boolean, callback?: () => void): this;
  }
  const mqtt: { connect(url: string, options: ClientOptions): MqttClient };
  export default mqtt;
}
