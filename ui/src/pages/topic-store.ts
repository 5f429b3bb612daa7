// What the topic explorer keeps per topic: the last value, a message count and a rate over the
// last 10 seconds. Bounded: beyond `maxTopics` new topics are only counted, so a busy broker
// cannot exhaust the browser.

export interface TopicStat {
  topic: string;
  count: number;
  /** The last payload as text (or hex when it is not UTF-8 text), at most 240 characters. */
  last: string;
  retained: boolean;
  lastAt: number;
  /** Messages per second over the last WINDOW seconds. */
  rate: number;
  buckets: Uint16Array;
}

export interface TopicNode {
  name: string;
  path: string;
  stat?: TopicStat;
  children: Map<string, TopicNode>;
}

const WINDOW = 10;
const PREVIEW = 240;
const decoder = new TextDecoder('utf-8', { fatal: true });

export function preview(payload: Uint8Array): string {
  let text: string;
  try {
    text = decoder.decode(payload.length > PREVIEW * 4 ? payload.subarray(0, PREVIEW * 4) : payload);
    if (/[\u0000-\u0008\u000e-\u001f]/.test(text)) throw new Error('binary');
  } catch {
    const hex = Array.from(payload.subarray(0, PREVIEW / 3), (b) => b.toString(16).padStart(2, '0')).join(' ');
    return `(binary, ${payload.length} bytes) ${hex}`;
  }
  return text.length > PREVIEW ? `${text.slice(0, PREVIEW)}…` : text;
}

export class TopicStore {
  readonly topics = new Map<string, TopicStat>();
  /** Messages of topics beyond the bound (not shown). */
  dropped = 0;
  total = 0;
  private slot = 0;

  constructor(private readonly maxTopics: number) {}

  add(topic: string, payload: Uint8Array, retained: boolean, now = Date.now()): void {
    this.total++;
    let stat = this.topics.get(topic);
    if (!stat) {
      if (this.topics.size >= this.maxTopics) {
        this.dropped++;
        return;
      }
      stat = { topic, count: 0, last: '', retained, lastAt: now, rate: 0, buckets: new Uint16Array(WINDOW) };
      this.topics.set(topic, stat);
    }
    stat.count++;
    stat.last = preview(payload);
    stat.retained = retained;
    stat.lastAt = now;
    const b = stat.buckets;
    if (b[this.slot]! < 0xffff) b[this.slot]!++;
  }

  /** Called once a second: the rates of the last WINDOW seconds, then a fresh bucket. */
  tick(): void {
    for (const stat of this.topics.values()) {
      let sum = 0;
      for (const n of stat.buckets) sum += n;
      stat.rate = sum / WINDOW;
    }
    this.slot = (this.slot + 1) % WINDOW;
    for (const stat of this.topics.values()) stat.buckets[this.slot] = 0;
  }

  clear(): void {
    this.topics.clear();
    this.dropped = 0;
    this.total = 0;
  }

  /** The topics as a tree of levels, sorted by name at every level. */
  tree(): TopicNode {
    const root: TopicNode = { name: '', path: '', children: new Map() };
    for (const stat of [...this.topics.values()].sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : 0))) {
      let node = root;
      const levels = stat.topic.split('/');
      levels.forEach((level, i) => {
        let child = node.children.get(level);
        if (!child) {
          child = { name: level, path: levels.slice(0, i + 1).join('/'), children: new Map() };
          node.children.set(level, child);
        }
        node = child;
      });
      node.stat = stat;
    }
    return root;
  }
}
