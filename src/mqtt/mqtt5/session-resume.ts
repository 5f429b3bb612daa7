// Offline message queueing for an MQTT 5 session resumed by a connection that asks for a Session
// Expiry Interval of 0. Exists because aedes 2.0.0-beta.1 derives `client.clean` ("the session
// ends with this connection") from the new expiry alone and then drops the queue of the session
// it resumes (handlers/connect.js, emptyQueueFilter). MQTT 5 §3.1.2.4 resumes the session, queued
// messages included, and ends it when this connection closes (Paho test_offline_message_queueing,
// test_publication_expiry). Marking the connection persistent makes aedes replay the queue; when
// it closes, aedes still ends the session at once (scheduleSessionExpiry with interval 0 wipes it).
import type { Client } from 'aedes';

/** Called once the client is admitted, before aedes restores the session. */
export function keepQueueOfResumedSession(client: Client, resumeRequested: boolean): void {
  const c = client as Client & { version?: number };
  if (c.version === 5 && resumeRequested && c.clean) c.clean = false;
}
