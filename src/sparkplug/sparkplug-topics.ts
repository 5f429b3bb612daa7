// The Sparkplug B topic namespace (specification chapter 4):
// spBv1.0/<group>/<NBIRTH|NDEATH|NDATA|NCMD>/<edge node> and spBv1.0/<group>/<DBIRTH|DDEATH|DDATA|DCMD>/<edge node>/<device>;
// a host application's state on spBv1.0/STATE/<host id>.

export const NAMESPACE = 'spBv1.0';
export type NodeMessageType = 'NBIRTH' | 'NDEATH' | 'NDATA' | 'NCMD';
export type DeviceMessageType = 'DBIRTH' | 'DDEATH' | 'DDATA' | 'DCMD';
export type MessageType = NodeMessageType | DeviceMessageType;

export interface EdgeNodeTopics {
  node(type: NodeMessageType): string;
  device(type: DeviceMessageType, deviceId: string): string;
  /** The filter of every DCMD to this edge node's devices. */
  readonly deviceCommands: string;
  /** The primary host's STATE topic (undefined without a primary host). */
  readonly hostState: string | undefined;
  /** The device id of a DCMD topic of this node (undefined for any other topic). */
  commandDevice(topic: string): string | undefined;
}

export function edgeNodeTopics(groupId: string, edgeNodeId: string, primaryHostId?: string): EdgeNodeTopics {
  const node = (type: string) => `${NAMESPACE}/${groupId}/${type}/${edgeNodeId}`;
  const dcmd = `${node('DCMD')}/`;
  return {
    node,
    device: (type, deviceId) => `${node(type)}/${deviceId}`,
    deviceCommands: `${dcmd}+`,
    hostState: primaryHostId === undefined ? undefined : `${NAMESPACE}/STATE/${primaryHostId}`,
    commandDevice: (topic) => (topic.startsWith(dcmd) && topic.indexOf('/', dcmd.length) < 0 ? topic.slice(dcmd.length) : undefined),
  };
}
