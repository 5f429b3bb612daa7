import type { Broker } from '../../mqtt/index.js';
import type { RouteModule } from '../create-http-app.js';

/**
 * POST /api/broker/auth/enhanced: MQTT 5 enhanced authentication is declared unsupported;
 * the modifiers are the running broker's real limits.
 */
export function brokerRoutes(deps: { broker: () => Broker | undefined }): RouteModule {
  return (r) => {
    r.post('/api/broker/auth/enhanced', (_req, res) => {
      const broker = deps.broker();
      res.json(
        broker?.enhancedAuthInfo() ?? {
          result: 'enhanced authentication is not supported: the MQTT broker is disabled',
          modifiers: { max_message_size: '0', max_inflight_messages: '0', retry_interval: '0' },
        },
      );
    });
  };
}
