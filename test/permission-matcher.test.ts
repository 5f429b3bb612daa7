import { expect } from 'chai';

import { BadRequestError } from '../src/errors/errors.js';
import {
  MAX_PATTERN_LEVELS,
  PermissionSet,
  operationFor,
  stripQuery,
  validatePattern,
  validateTopicFilter,
  validateTopicName,
  type AccessOperation,
  type PermissionContext,
  type PermissionGrant,
  type PermissionOperation,
} from '../src/permissions/index.js';
import { patternCovers, patternMatches } from '../src/permissions/topic-pattern.js';

const CONTEXTS: readonly PermissionContext[] = ['mqtt', 'http'];
const OPS: readonly AccessOperation[] = ['read', 'write'];

function single(resource: string, operation: PermissionOperation = 'readWrite', context: PermissionContext = 'mqtt'): PermissionSet {
  return new PermissionSet([{ resource, operation, context }]);
}

// [pattern, concrete topic or path, expected]
const MATCH_TABLE: ReadonlyArray<readonly [string, string, boolean]> = [
  ['a/b/c', 'a/b/c', true],
  ['a/b/c', 'a/b', false],
  ['a/b', 'a/b/c', false],
  ['a/b', 'A/b', false],
  ['a/+/c', 'a/x/c', true],
  ['a/+/c', 'a/x/y/c', false],
  // `+` at the end: exactly one level, which may be empty
  ['a/+', 'a/b', true],
  ['a/+', 'a', false],
  ['a/+', 'a/', true],
  ['a/+', 'a/b/c', false],
  ['+', 'a', true],
  ['+', 'a/b', false],
  // empty levels and leading '/' (MQTT §4.7.1.3 examples)
  ['a//b', 'a//b', true],
  ['a//b', 'a/b', false],
  ['a/+/b', 'a//b', true],
  ['+/+', '/finance', true],
  ['/+', '/finance', true],
  ['+', '/finance', false],
  // `#` matches the parent and everything below
  ['a/#', 'a', true],
  ['a/#', 'a/', true],
  ['a/#', 'a/b', true],
  ['a/#', 'a/b/c/d/e', true],
  ['a/#', 'ab', false],
  ['a/#', 'b/a', false],
  ['a/b/#', 'a', false],
  ['#', 'a', true],
  ['#', 'a/b/c', true],
  ['#', '/x', true],
  ['+/#', 'a', true],
  ['+/#', 'a/b/c', true],
  // `$`-topics: wildcards in the first level never match them (§4.7.2)
  ['#', '$SYS/broker/load', false],
  ['#', '$SYS', false],
  ['+', '$SYS', false],
  ['+/#', '$SYS/x', false],
  ['+/broker/#', '$SYS/broker/load', false],
  ['$SYS/#', '$SYS/broker/load', true],
  ['$SYS/#', '$SYS', true],
  ['$SYS/+', '$SYS/uptime', true],
  ['$SYS/+/load', '$SYS/broker/load', true],
  ['$SYS/x', '$SYS/x', true],
  ['$SYS', '$SYS/x', false],
  // `$` only matters in the first level
  ['a/+', 'a/$SYS', true],
  ['a/#', 'a/$x/y', true],
  // http paths
  ['/api/users/+', '/api/users/42', true],
  ['/api/users/+', '/api/users', false],
  ['/api/users/+', '/api/users/42/roles', false],
  ['/api/users/+/roles', '/api/users/42/roles', true],
  ['/api/#', '/api/users/42', true],
  ['/api/#', '/api', true],
  ['/api/#', '/apix', false],
  ['/api/#', 'api/users', false],
  ['/api/users', '/api/users', true],
  ['/api/users', '/api/users/42', false],
  ['/api/users', '/api/users/', false],
  ['/api/users/#', '/api/users', true],
  ['/api/users/#', '/api/users/42/roles', true],
  ['/api/users/#', '/api/userstats', false],
  ['#', '/api/users', true],
  // a wildcard character in a concrete path is just text: only wildcards match it
  ['/api/+', '/api/+', true],
  ['/api/users', '/api/+', false],
  ['/api/#', '/api/#', true],
];

// [granted pattern, subscription filter, expected: does the pattern cover every topic of the filter]
const COVER_TABLE: ReadonlyArray<readonly [string, string, boolean]> = [
  ['a/+/c', 'a/x/c', true],
  ['a/+/c', 'a/+/c', true],
  ['a/+/c', 'a/#', false],
  ['a/+/c', 'a/x/#', false],
  ['a/+/c', 'a/+/+', false],
  ['a/#', 'a', true],
  ['a/#', 'a/#', true],
  ['a/#', 'a/+', true],
  ['a/#', 'a/+/b/#', true],
  ['a/#', 'a//#', true],
  ['a/#', '#', false],
  ['a/#', '+/#', false],
  ['a/#', 'b', false],
  ['a', 'a/#', false],
  ['a/b', 'a/b', true],
  ['a/b', 'a/+', false],
  ['a/b', 'a/b/#', false],
  ['a/b/#', 'a/b', true],
  ['a/+/#', 'a/#', false], // `a/#` includes `a` itself, `a/+/#` does not
  ['a/+/#', 'a/+', true],
  ['a/+/#', 'a/b/#', true],
  ['a//b', 'a/+/b', false],
  ['a/+/b', 'a//b', true],
  ['+', '+', true],
  ['+', 'a', true],
  ['+', '#', false],
  ['+', 'a/b', false],
  ['+/x', '+/#', false],
  ['+/x', '+/x', true],
  ['+/x', 'a/x', true],
  ['#', '#', true],
  ['#', 'a/b', true],
  ['#', '+/+', true],
  ['#', '+/#', true],
  ['+/#', '#', true], // no topic has zero levels, so `+/#` and `#` match the same topics
  ['+/+/#', '#', false],
  // `$` filters are covered only by a pattern whose first level is literally `$SYS`
  ['#', '$SYS/#', false],
  ['#', '$SYS', false],
  ['+/#', '$SYS/x', false],
  ['+/x', '$SYS/x', false],
  ['$SYS/#', '$SYS/#', true],
  ['$SYS/#', '$SYS/broker/+', true],
  ['$SYS/+', '$SYS/#', false],
  ['$SYS/#', '#', false],
  ['$SYS/#', '+/broker', false],
  // http
  ['/api/users/#', '/api/users/+', true],
  ['/api/#', '/api/users/#', true],
  ['/api/users/+', '/api/#', false],
  ['/api/users/+', '/api/users/42', true],
];

describe('permission matcher', () => {
  describe('allows(): pattern vs concrete topic/path', () => {
    for (const [pattern, topic, expected] of MATCH_TABLE) {
      it(`'${pattern}' ${expected ? 'matches' : 'does not match'} '${topic}'`, () => {
        expect(validatePattern(pattern), 'pattern is valid').to.equal(null);
        expect(patternMatches(pattern, topic), 'oracle').to.equal(expected);
        for (const context of CONTEXTS) {
          const set = single(pattern, 'readWrite', context);
          for (const op of OPS) expect(set.allows(context, op, topic), `${context} ${op}`).to.equal(expected);
        }
      });
    }

    it('backtracks from a literal branch into a `+` branch', () => {
      const set = new PermissionSet([
        { resource: 'a/b/d', operation: 'read', context: 'mqtt' },
        { resource: 'a/+/c', operation: 'read', context: 'mqtt' },
        { resource: '+/b/e/#', operation: 'read', context: 'mqtt' },
      ]);
      expect(set.allows('mqtt', 'read', 'a/b/c')).to.equal(true);
      expect(set.allows('mqtt', 'read', 'a/b/d')).to.equal(true);
      expect(set.allows('mqtt', 'read', 'x/b/e')).to.equal(true);
      expect(set.allows('mqtt', 'read', 'a/b/e/f')).to.equal(true);
      expect(set.allows('mqtt', 'read', 'a/b/f')).to.equal(false);
      expect(set.allows('mqtt', 'read', 'x/b/d')).to.equal(false);
    });

    it('matches the path after the query string is stripped', () => {
      const set = single('/api/users/+', 'read', 'http');
      expect(set.allows('http', 'read', stripQuery('/api/users/42?fields=name&x=/a/b'))).to.equal(true);
      expect(set.allows('http', 'read', stripQuery('/api/users?limit=5'))).to.equal(false);
      expect(single('/api/users', 'read', 'http').allows('http', 'read', stripQuery('/api/users?limit=5'))).to.equal(true);
    });
  });

  describe('coversFilter(): pattern vs subscription filter', () => {
    for (const [pattern, filter, expected] of COVER_TABLE) {
      it(`'${pattern}' ${expected ? 'covers' : 'does not cover'} '${filter}'`, () => {
        expect(validatePattern(pattern), 'pattern is valid').to.equal(null);
        expect(validateTopicFilter(filter), 'filter is valid').to.equal(null);
        expect(patternCovers(pattern, filter), 'oracle').to.equal(expected);
        for (const context of CONTEXTS) {
          const set = single(pattern, 'readWrite', context);
          for (const op of OPS) expect(set.coversFilter(context, op, filter), `${context} ${op}`).to.equal(expected);
        }
      });
    }

    it('needs ONE pattern to cover the filter, not the union of several', () => {
      const set = new PermissionSet([
        { resource: 'a', operation: 'read', context: 'mqtt' },
        { resource: 'a/+/#', operation: 'read', context: 'mqtt' },
      ]);
      expect(set.allows('mqtt', 'read', 'a')).to.equal(true);
      expect(set.allows('mqtt', 'read', 'a/b/c')).to.equal(true);
      expect(set.coversFilter('mqtt', 'read', 'a/#')).to.equal(false);
      expect(set.coversFilter('mqtt', 'read', 'a/+')).to.equal(true);
    });
  });

  describe('operations and contexts', () => {
    it('readWrite grants both read and write', () => {
      const set = single('plant/+/temp', 'readWrite');
      expect(set.allows('mqtt', 'read', 'plant/l1/temp')).to.equal(true);
      expect(set.allows('mqtt', 'write', 'plant/l1/temp')).to.equal(true);
      expect(set.coversFilter('mqtt', 'read', 'plant/+/temp')).to.equal(true);
      expect(set.coversFilter('mqtt', 'write', 'plant/+/temp')).to.equal(true);
    });

    it('read does not grant write, write does not grant read', () => {
      const reader = single('plant/#', 'read');
      expect(reader.allows('mqtt', 'read', 'plant/l1')).to.equal(true);
      expect(reader.allows('mqtt', 'write', 'plant/l1')).to.equal(false);
      expect(reader.coversFilter('mqtt', 'write', 'plant/#')).to.equal(false);
      const writer = single('plant/#', 'write');
      expect(writer.allows('mqtt', 'write', 'plant/l1')).to.equal(true);
      expect(writer.allows('mqtt', 'read', 'plant/l1')).to.equal(false);
      expect(writer.coversFilter('mqtt', 'read', 'plant/#')).to.equal(false);
    });

    it('keeps mqtt and http grants apart', () => {
      const set = new PermissionSet([
        { resource: '#', operation: 'readWrite', context: 'mqtt' },
        { resource: '/api/users/+', operation: 'read', context: 'http' },
      ]);
      expect(set.allows('http', 'read', '/api/devices')).to.equal(false);
      expect(set.allows('http', 'read', '/api/users/7')).to.equal(true);
      expect(set.allows('mqtt', 'read', '/api/devices')).to.equal(true);
      expect(set.allows('http', 'write', '/api/users/7')).to.equal(false);
    });

    it('denies unknown contexts and operations at runtime', () => {
      const set = single('#');
      expect(set.allows('amqp' as PermissionContext, 'read', 'a')).to.equal(false);
      expect(set.allows('mqtt', 'readWrite' as AccessOperation, 'a')).to.equal(false);
      expect(set.coversFilter('mqtt', 'delete' as AccessOperation, 'a')).to.equal(false);
    });

    it('the empty set denies everything', () => {
      expect(PermissionSet.EMPTY.size).to.equal(0);
      expect(PermissionSet.EMPTY.allows('mqtt', 'read', 'a')).to.equal(false);
      expect(PermissionSet.EMPTY.allows('mqtt', 'read', '$SYS/x')).to.equal(false);
      expect(PermissionSet.EMPTY.coversFilter('http', 'write', '#')).to.equal(false);
    });

    const METHODS: ReadonlyArray<readonly [string, AccessOperation]> = [
      ['GET', 'read'], ['HEAD', 'read'], ['OPTIONS', 'read'], ['get', 'read'],
      ['POST', 'write'], ['PUT', 'write'], ['PATCH', 'write'], ['DELETE', 'write'], ['delete', 'write'],
      ['TRACE', 'write'], ['PROPFIND', 'write'],
    ];
    for (const [method, op] of METHODS) {
      it(`operationFor(${method}) is ${op}`, () => expect(operationFor(method)).to.equal(op));
    }
  });

  describe('building a set', () => {
    it('counts distinct grants and ignores duplicates', () => {
      const set = new PermissionSet([
        { resource: 'a/#', operation: 'read', context: 'mqtt' },
        { resource: 'a/#', operation: 'read', context: 'mqtt' },
        { resource: 'a/#', operation: 'write', context: 'mqtt' },
        { resource: 'a/#', operation: 'read', context: 'http' },
      ]);
      expect(set.size).to.equal(3);
      // The broker admits a user only with an MQTT grant: counted apart from the HTTP ones.
      expect(set.mqttGrants).to.equal(2);
      expect(new PermissionSet([{ resource: '/api/#', operation: 'read', context: 'http' }]).mqttGrants).to.equal(0);
      expect(PermissionSet.EMPTY.mqttGrants).to.equal(0);
    });

    it('accepts any iterable, e.g. a generator', () => {
      function* grants(): Generator<PermissionGrant> {
        for (let i = 0; i < 3; i++) yield { resource: `plant/line${i}/#`, operation: 'read', context: 'mqtt' };
      }
      const set = new PermissionSet(grants());
      expect(set.size).to.equal(3);
      expect(set.allows('mqtt', 'read', 'plant/line2/m1')).to.equal(true);
      expect(set.allows('mqtt', 'read', 'plant/line3/m1')).to.equal(false);
    });

    it('is frozen', () => {
      expect(Object.isFrozen(single('a'))).to.equal(true);
    });

    it('rejects invalid grants with a BadRequestError listing each one', () => {
      const grants = [
        { resource: 'ok/#', operation: 'read', context: 'mqtt' },
        { resource: 'a/#/b', operation: 'read', context: 'mqtt' },
        { resource: '', operation: 'read', context: 'mqtt' },
        { resource: 'a', operation: 'execute', context: 'mqtt' },
        { resource: 'a', operation: 'read', context: 'coap' },
        { resource: '/api?x=1', operation: 'read', context: 'http' },
      ] as unknown as PermissionGrant[];
      let caught: unknown;
      try {
        new PermissionSet(grants);
      } catch (err) {
        caught = err;
      }
      expect(caught).to.be.instanceOf(BadRequestError);
      const err = caught as BadRequestError;
      expect(err.status).to.equal(400);
      expect(err.errors?.map((e) => e.path)).to.deep.equal([
        'permissions[1].resource',
        'permissions[2].resource',
        'permissions[3].operation',
        'permissions[4].context',
        'permissions[5].resource',
      ]);
      for (const issue of err.errors ?? []) expect(issue.message).to.be.a('string').and.not.equal('');
    });
  });

  describe('validation', () => {
    const INVALID_PATTERNS = [
      '', 'a/#/b', '#/a', '#/', 'a/b#', 'a#', '#a', 'a+/b', 'a/+b', '++', '##', '+#', 'a/\u0000', 'x'.repeat(65_536),
      'é'.repeat(32_768), // 65,536 UTF-8 bytes
    ];
    for (const pattern of INVALID_PATTERNS) {
      it(`rejects pattern ${JSON.stringify(pattern.length > 20 ? `${pattern.slice(0, 8)}…(${pattern.length})` : pattern)}`, () => {
        expect(validatePattern(pattern)).to.be.a('string').and.not.equal('');
        expect(validateTopicFilter(pattern)).to.be.a('string').and.not.equal('');
      });
    }

    const VALID_PATTERNS = [
      'a', '/', '//', 'a//b', '/api/users', '/api/users/', '#', '+', '+/+/#', '/#', '$SYS/#', 'a/+/#', ' ', 'ü/€', 'x'.repeat(65_535),
    ];
    for (const pattern of VALID_PATTERNS) {
      it(`accepts pattern ${JSON.stringify(pattern.length > 20 ? `${pattern.slice(0, 8)}…(${pattern.length})` : pattern)}`, () => {
        expect(validatePattern(pattern)).to.equal(null);
        expect(validateTopicFilter(pattern)).to.equal(null);
      });
    }

    it('limits pattern depth to MAX_PATTERN_LEVELS (topic filters are not limited)', () => {
      const deep = (n: number): string => Array.from({ length: n }, () => '+').join('/');
      expect(validatePattern(deep(MAX_PATTERN_LEVELS))).to.equal(null);
      expect(validatePattern(deep(MAX_PATTERN_LEVELS + 1))).to.be.a('string');
      expect(validateTopicFilter(deep(MAX_PATTERN_LEVELS + 1))).to.equal(null);
      // The deepest allowed patterns against very deep topics/filters must not exhaust the stack.
      const set = new PermissionSet([
        { resource: deep(MAX_PATTERN_LEVELS), operation: 'read', context: 'mqtt' },
        { resource: `${deep(MAX_PATTERN_LEVELS - 1)}/#`, operation: 'read', context: 'mqtt' },
      ]);
      const topic = (n: number): string => Array.from({ length: n }, (_, i) => `l${i % 7}`).join('/');
      expect(set.allows('mqtt', 'read', topic(MAX_PATTERN_LEVELS))).to.equal(true);
      expect(set.allows('mqtt', 'read', topic(20_000))).to.equal(true);
      expect(set.allows('mqtt', 'read', topic(MAX_PATTERN_LEVELS - 2))).to.equal(false);
      expect(set.coversFilter('mqtt', 'read', deep(20_000))).to.equal(true);
      expect(set.coversFilter('mqtt', 'read', deep(MAX_PATTERN_LEVELS - 2))).to.equal(false);
    });

    it('rejects a query string in an http pattern only', () => {
      expect(validatePattern('/api/users?x=1', 'http')).to.be.a('string');
      expect(validatePattern('what?/now', 'mqtt')).to.equal(null);
    });

    for (const topic of ['', 'a/+', 'a/#', '#', '+', 'a+b', 'a/b#', 'a\u0000b']) {
      it(`rejects topic name ${JSON.stringify(topic)}`, () => {
        expect(validateTopicName(topic)).to.be.a('string').and.not.equal('');
      });
    }
    for (const topic of ['a', 'a/b', '/x', 'a//b', '/', '$SYS/x', 'ü']) {
      it(`accepts topic name ${JSON.stringify(topic)}`, () => expect(validateTopicName(topic)).to.equal(null));
    }

    it('stripQuery drops the query string only', () => {
      expect(stripQuery('/api/users?limit=5')).to.equal('/api/users');
      expect(stripQuery('/api/users?')).to.equal('/api/users');
      expect(stripQuery('/api/users')).to.equal('/api/users');
      expect(stripQuery('?a=1')).to.equal('');
      expect(stripQuery('/a?b?c')).to.equal('/a');
    });
  });

  describe('property: trie equals the naive oracle', () => {
    // mulberry32: tiny seeded PRNG so failures reproduce exactly.
    function prng(seed: number): () => number {
      let a = seed >>> 0;
      return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
      };
    }

    const PATTERN_LEVELS = ['a', 'b', '', '$SYS', '+', '#'];
    const TOPIC_LEVELS = ['a', 'b', '', '$SYS', 'c'];
    const OPERATIONS: readonly PermissionOperation[] = ['read', 'write', 'readWrite'];

    it('agrees on 5,000 random sets of 1..20 grants', () => {
      const rnd = prng(0x5eed);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
      const int = (lo: number, hi: number): number => lo + Math.floor(rnd() * (hi - lo + 1));

      const randomFilter = (): string => {
        const levels: string[] = [];
        const n = int(1, 4);
        for (let i = 0; i < n; i++) {
          const level = pick(PATTERN_LEVELS);
          levels.push(level);
          if (level === '#') break; // `#` only as the last level
        }
        const filter = levels.join('/');
        return filter === '' ? randomFilter() : filter; // '' is not a valid filter
      };
      const randomTopic = (): string => {
        const n = int(1, 5);
        return Array.from({ length: n }, () => pick(TOPIC_LEVELS)).join('/') || 'a';
      };
      // Derived from a grant so that a useful share of the queries are hits.
      const topicFrom = (pattern: string): string =>
        pattern
          .split('/')
          .flatMap((l) => (l === '+' ? [pick(TOPIC_LEVELS)] : l === '#' ? Array.from({ length: int(0, 2) }, () => pick(TOPIC_LEVELS)) : [l]))
          .join('/') || 'a';
      const filterFrom = (pattern: string): string => {
        const out: string[] = [];
        for (const l of pattern.split('/')) {
          if (l === '+') out.push(rnd() < 0.5 ? '+' : pick(TOPIC_LEVELS));
          else if (l === '#') {
            for (let k = int(0, 2); k > 0; k--) out.push(pick(['+', ...TOPIC_LEVELS]));
            if (rnd() < 0.6) out.push('#');
          } else out.push(l);
        }
        const filter = out.join('/');
        return filter === '' ? '#' : filter;
      };

      let matchHits = 0;
      let coverHits = 0;
      let decisions = 0;
      for (let c = 0; c < 5_000; c++) {
        const grants: PermissionGrant[] = Array.from({ length: int(1, 20) }, () => ({
          resource: randomFilter(),
          operation: pick(OPERATIONS),
          context: pick(CONTEXTS),
        }));
        for (const g of grants) expect(validatePattern(g.resource), g.resource).to.equal(null);
        const set = new PermissionSet(grants);

        for (let q = 0; q < 4; q++) {
          const base = pick(grants).resource;
          const topic = rnd() < 0.5 ? topicFrom(base) : randomTopic();
          const filter = rnd() < 0.5 ? filterFrom(base) : randomFilter();
          expect(validateTopicFilter(filter), filter).to.equal(null);
          // The oracles must agree with each other on wildcard-free filters.
          expect(patternCovers(base, topic), `oracle consistency ${base} ${topic}`).to.equal(patternMatches(base, topic));

          for (const context of CONTEXTS) {
            for (const op of OPS) {
              const relevant = grants.filter((g) => g.context === context && (g.operation === op || g.operation === 'readWrite'));
              const expectedMatch = relevant.some((g) => patternMatches(g.resource, topic));
              const expectedCover = relevant.some((g) => patternCovers(g.resource, filter));
              const why = `case ${c}: ${context} ${op} grants=${JSON.stringify(relevant.map((g) => g.resource))}`;
              expect(set.allows(context, op, topic), `${why} allows '${topic}'`).to.equal(expectedMatch);
              expect(set.coversFilter(context, op, filter), `${why} covers '${filter}'`).to.equal(expectedCover);
              if (expectedMatch) matchHits++;
              if (expectedCover) coverHits++;
              decisions++;
            }
          }
        }
      }
      // Guard against a generator that only produces trivial "false" cases.
      expect(matchHits / decisions).to.be.within(0.15, 0.85);
      expect(coverHits / decisions).to.be.within(0.1, 0.85);
    });
  });
});
