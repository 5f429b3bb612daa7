// What a new user reads before anything runs (issue 38 points 1 and 8): the README's opening and
// the .deb's description name every protocol family gatewayd maps (a controls engineer looking
// for S7 or EtherNet/IP finds them there, not only deep in docs/mapping.md); the quick start says
// which Node lines are supported, as the start check decides them; every dependency's install
// script is decided in package.json's allowScripts, so npm 11's "not yet covered by
// allowScripts" warning does not end `npm ci`; the packaged environment file points to the page
// that describes its settings.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { NODE_END_OF_LIFE, TESTED_NODE_MAJORS } from '../src/platform/platform-requirements.js';
import { controlText } from '../scripts/package-deb-files.js';
import { TARGETS } from '../scripts/package-deb.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');

/** What the README's opening paragraph and the package description must name. */
const PROTOCOLS = [/Siemens S7/, /S7-1200\/1500/, /EtherNet\/IP/, /Modbus TCP and RTU/, /OPC UA client and server/, /Sparkplug B/, /MQTT bridges/, /HTTP polling/];

/** A README section's text, from its heading to the next one of the same level. */
function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n${heading}\n`);
  expect(start, heading).to.be.above(-1);
  const rest = markdown.slice(start + heading.length + 2);
  const end = rest.search(/\n## /);
  return end === -1 ? rest : rest.slice(0, end);
}

describe('what a new user reads first', () => {
  it("the README's opening paragraph names every protocol family, Siemens S7 and EtherNet/IP among them", () => {
    const opening = read('README.md').split('\n\n')[1]!.replace(/\s+/g, ' ');
    for (const p of PROTOCOLS) expect(opening, String(p)).to.match(p);
  });

  it("the .deb's description names them too, in lines dpkg shows whole", () => {
    const control = controlText({ target: TARGETS.amd64!, version: '1.0.0', installedSizeKiB: 1, bundledNode: '22.0.0' });
    const description = control.slice(control.indexOf('Description:')).replace(/\n /g, ' ');
    for (const p of PROTOCOLS) expect(description, String(p)).to.match(p);
    for (const line of control.split('\n')) expect(line.length, line).to.be.at.most(80);
  });

  it('the quick start says which Node lines are supported, as the start check decides, and why npm ci warns of no install script', () => {
    const quickStart = section(read('README.md'), '## Quick start').replace(/\s+/g, ' ');
    expect(quickStart).to.include(`Node.js ${TESTED_NODE_MAJORS.join(' or ')}`);
    for (const line of Object.keys(NODE_END_OF_LIFE)) expect(quickStart).to.match(new RegExp(`Node ${line}\\.\\d+\\+ still starts, with a warning that it is past its end of life`));
    expect(quickStart).to.match(/runs none of their install scripts/);
    expect(quickStart).to.include('(docs/platforms.md#install-scripts)');
  });

  it("decides every dependency's install script in allowScripts (npm 11 warns of the rest at the end of npm ci)", () => {
    const pkg = JSON.parse(read('package.json')) as { allowScripts: Record<string, boolean> };
    const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { hasInstallScript?: boolean; version: string }> };
    const withScripts = Object.entries(lock.packages)
      .filter(([path, p]) => path !== '' && p.hasInstallScript)
      .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));
    expect(withScripts, 'packages with install scripts').to.include.members(['lmdb', 'node-snap7']);
    const undecided = withScripts.filter((name) => typeof pkg.allowScripts[name] !== 'boolean');
    expect(undecided, 'install scripts neither allowed nor denied').to.deep.equal([]);
    // Only the S7 test peer is compiled; the native modules gatewayd runs on use their prebuilt binaries.
    expect(Object.entries(pkg.allowScripts).filter(([, allowed]) => allowed).map(([name]) => name)).to.deep.equal(['node-snap7']);
    const platforms = read('docs/platforms.md');
    for (const name of new Set(withScripts)) expect(platforms, name).to.include(`\`${name}\``);
  });

  it('the packaged environment file points to docs/configuration.md, which describes every setting it names', () => {
    const environment = read('packaging/deb/environment');
    expect(environment).to.include('docs/configuration.md');
    expect(environment).to.not.include('docs/platforms.md');
    const configuration = read('docs/configuration.md');
    const names = [...new Set(environment.match(/GATEWAYD_[A-Z_]+?(?=[^A-Z_]|__SECTION)/g) ?? [])];
    expect(names).to.include.members(['GATEWAYD_ADMIN_PASSWORD', 'GATEWAYD_SET']);
    for (const name of names) expect(configuration, name).to.include(name);
  });
});
