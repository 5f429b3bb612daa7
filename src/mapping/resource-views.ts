// What the REST API shows of each protocol-mapping resource (DESIGN §11), and the states.

export type ConnectionState = 'disconnected' | 'connecting' | 'connected' | 'reconnecting' | 'disconnecting';
export type EnableState = 'disabled' | 'enabling' | 'enabled' | 'disabling';

export interface ConnectionView {
  id: string;
  currentState: ConnectionState;
  targetState: 'connected' | 'disconnected';
  connection: Record<string, unknown>;
  agentName: string;
  message?: string;
}
export interface EndpointView {
  id: string;
  currentState: EnableState;
  targetState: 'enabled' | 'disabled';
  connectionId: string;
  operation: string;
  address: Record<string, unknown>;
  agentName: string;
  message?: string;
}
export interface MappingView {
  id: string;
  currentState: EnableState;
  targetState: 'enabled' | 'disabled';
  mappings: Record<string, unknown>[];
  agentName: string;
  message?: string;
}
export interface ServerView {
  id: string;
  options: Record<string, unknown>;
  /** The server's endpoint URL while it runs. */
  endpointUrl?: string;
  currentState: EnableState;
  targetState: 'enabled' | 'disabled';
  protocol: string;
  agentName: string;
  message?: string;
}
export interface NodeSetView {
  id: string;
  currentState: EnableState;
  targetState: 'enabled' | 'disabled';
  nodes: Record<string, unknown>[];
  agentName: string;
  message?: string;
}
export interface TopicsView {
  endpoints: { id: string; topics: string[] }[];
  mappings: { id: string; topics: string[] }[];
  nodes: { id: string; topics: string[] }[];
}
