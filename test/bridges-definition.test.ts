// The parts of a bridge definition that need no broker: topic rules as Mosquitto maps them, the
// checks of a Bridge resource (paths of the problems), and passwords redacted in what the API
// answers of a service file and restored from the file when it comes back.
import { expect } from 'chai';
import { bridgeProblems } from '../src/bridges/bridge-definition.js';
import { compileRules, filterMatches, inRuleFor, localTopicOf, outRuleFor, remoteTopicOf, ruleProblems } from '../src/bridges/topic-rules.js';
import { REDACTED, redactSecrets, restoreSecrets } from '../src/mapping/service-secrets.js';

describe('bridge definitions', () => {
  it('matches topic filters as MQTT does', () => {
    const cases: [string, string, boolean][] = [
      ['plant/#', 'plant', true],
      ['plant/#', 'plant/a/b', true],
      ['plant/+/temp', 'plant/a/temp', true],
      ['plant/+/temp', 'plant/a/b/temp', false],
      ['plant/+', 'plant/', true],
      ['plant', 'plant/a', false],
      ['#', '$SYS/broker', false],
      ['$SYS/#', '$SYS/broker', true],
    ];
    for (const [filter, topic, expected] of cases) expect(filterMatches(filter, topic), `${filter} ${topic}`).to.equal(expected);
  });

  it('maps topics with the prefixes, the first matching rule of a direction winning', () => {
    const rules = compileRules([
      { pattern: 'plant/#', direction: 'out', qos: 1, remotePrefix: 'site-a/' },
      { pattern: 'plant/line-1/#', direction: 'out', remotePrefix: 'other/' },
      { pattern: 'cmd/#', direction: 'in', localPrefix: 'edge/', remotePrefix: 'site-a/' },
      { pattern: '', direction: 'both', localPrefix: 'local/one', remotePrefix: 'remote/one' },
    ]);
    const out = outRuleFor(rules, 'plant/line-1/temp')!;
    expect([out.index, remoteTopicOf(out, 'plant/line-1/temp')]).to.deep.equal([0, 'site-a/plant/line-1/temp']);
    const inRule = inRuleFor(rules, 'site-a/cmd/valve')!;
    expect(localTopicOf(inRule, 'site-a/cmd/valve')).to.equal('edge/cmd/valve');
    expect(inRuleFor(rules, 'site-a/plant/x')).to.equal(undefined);
    expect(remoteTopicOf(outRuleFor(rules, 'local/one')!, 'local/one')).to.equal('remote/one');
    expect(localTopicOf(inRuleFor(rules, 'remote/one')!, 'remote/one')).to.equal('local/one');
    expect(rules[0]).to.deep.include({ qos: 1, retainAsPublished: true, localFilter: 'plant/#', remoteFilter: 'site-a/plant/#' });
  });

  it('names each problem of a Bridge by its path', () => {
    expect(ruleProblems({ pattern: 'a/#/b', direction: 'out' })).to.deep.equal([{ path: 'pattern', reason: 'not a valid topic filter (+ is a whole level, # the whole last level)' }]);
    expect(ruleProblems({ pattern: '#', direction: 'out', localPrefix: 'a/+/' })[0]!.path).to.equal('localPrefix');
    expect(ruleProblems({ pattern: '', direction: 'in', localPrefix: 'x' })[0]!.path).to.equal('pattern');
    expect(ruleProblems({ pattern: '$SYS/#', direction: 'out' })[0]!.path).to.equal('pattern');
    const problems = bridgeProblems(
      {
        remote: { urls: ['mqtts://central-a:8883', 'ftp://central-b', 'not a url', 'mqtt://u:p@central-c', 'mqtt://central-d/path'], certFile: 'certs/gw.pem', caFile: '../etc/ca.pem' },
        runAs: 'nobody',
        topics: [{ pattern: 'plant/#', direction: 'out' }],
      },
      (name) => name === 'bridge-cloud',
    );
    expect(problems.map((p) => p.path)).to.deep.equal(['remote.urls[1]', 'remote.urls[2]', 'remote.urls[3]', 'remote.urls[4]', 'remote.caFile', 'remote.keyFile', 'runAs']);
    expect(bridgeProblems({ remote: { urls: ['wss://central/mqtt'] }, runAs: 'bridge-cloud', topics: [{ pattern: 'a', direction: 'in' }] }, () => true)).to.deep.equal([]);
  });

  it('redacts passwords (literal or a !ref parameter; Bridge, Connection, a Sparkplug upstream) and restores them from the file on disk', () => {
    const file = [
      '# the uplink',
      'parameters:',
      '  cloudPassword: {type: String, default: s3cret-pw}',
      'resources:',
      '  cloud:',
      '    type: Bridge',
      '    properties:',
      '      remote: {urls: ["mqtt://c:1883"], password: !ref cloudPassword}',
      '      runAs: x',
      '      topics: [{pattern: "a/#", direction: out}]',
      '  plc:',
      '    type: Connection',
      '    properties: {protocol: Mqtt, configuration: {url: "mqtt://d", password: other-pw}}',
      '  edge:',
      '    type: Sparkplug',
      '    properties: {via: {urls: ["mqtt://e"], password: edge-pw}}',
      '  edge2:',
      '    type: Sparkplug',
      '    properties: {via: !ref cloud}',
      '',
    ].join('\n');
    const shown = redactSecrets(file);
    expect(shown).not.to.include('s3cret-pw');
    expect(shown).not.to.include('other-pw');
    expect(shown).not.to.include('edge-pw');
    expect(shown).to.include('# the uplink').and.to.include('via: !ref cloud');
    expect(shown.split(REDACTED)).to.have.lengthOf(4);
    const back = restoreSecrets(shown, file);
    expect(back).to.include('s3cret-pw').and.to.include('other-pw').and.to.include('edge-pw');
    expect(restoreSecrets(shown.replace(`cloudPassword: { type: String, default: "${REDACTED}" }`, 'cloudPassword: { type: String, default: new-pw }'), file)).to.include('new-pw');
    expect(() => restoreSecrets(shown, undefined)).to.throw(/send the password/);
    expect(redactSecrets('resources: {a: {type: Mapping, properties: {}}}\n')).to.equal('resources: {a: {type: Mapping, properties: {}}}\n');
  });
});
