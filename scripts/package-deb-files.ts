// The generated files of the .deb (scripts/package-deb.ts): control, copyright, changelog,
// md5sums, and the installed size.
import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

export interface DebTarget {
  /** Debian's name of the architecture. */
  arch: 'amd64' | 'arm64' | 'armhf';
  /** Node's (and npm's --cpu) name of it. */
  cpu: 'x64' | 'arm64' | 'arm';
  /** e_machine of its ELF files: EM_X86_64, EM_AARCH64, EM_ARM. */
  elfMachine: number;
  /** The npm package of the official Node binary bundled for it, if one is bundled. */
  nodePackage?: string;
}

const MAINTAINER = process.env.DEB_MAINTAINER ?? 'gatewayd maintainers <maintainers@gatewayd.example>';

/** Every path under `dir` (files, symlinks, directories), depth first. */
function* walk(dir: string): Generator<{ path: string; isDir: boolean; isFile: boolean; size: number }> {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const stat = lstatSync(path);
    yield { path, isDir: stat.isDirectory(), isFile: stat.isFile(), size: stat.size };
    if (stat.isDirectory()) yield* walk(path);
  }
}

/** Installed-Size as dpkg-gencontrol counts it: each file's size in KiB rounded up, one per other entry. */
export function installedSizeKiB(tree: string): number {
  let kib = 0;
  for (const entry of walk(tree)) {
    if (relative(tree, entry.path).startsWith('DEBIAN')) continue;
    kib += entry.isFile ? Math.ceil(entry.size / 1024) : 1;
  }
  return kib;
}

/** DEBIAN/md5sums: every regular file but the conffiles (dpkg keeps their sums itself). */
export function md5sumsText(tree: string, exclude: string[]): string {
  const lines: string[] = [];
  for (const entry of walk(tree)) {
    const rel = relative(tree, entry.path);
    if (!entry.isFile || rel.startsWith('DEBIAN/') || exclude.some((e) => rel.startsWith(e))) continue;
    lines.push(`${createHash('md5').update(readFileSync(entry.path)).digest('hex')}  ${rel}`);
  }
  return lines.sort().join('\n') + '\n';
}

export function controlText(o: { target: DebTarget; version: string; installedSizeKiB: number; bundledNode?: string }): string {
  // glibc 2.34 and GCC 11's libstdc++ (GLIBCXX_3.4.29): what LMDB's prebuilt binary asks for.
  const depends = ['adduser', 'libc6 (>= 2.34)', 'libgcc-s1', 'libstdc++6 (>= 11)'];
  if (!o.bundledNode) depends.push('nodejs (>= 22)');
  const node = o.bundledNode
    ? ` It bundles the official Node.js ${o.bundledNode} binary (/usr/lib/gatewayd/node),\n the Node line its tests run on, whatever Node the distribution ships.`
    : " It runs on the system's Node.js 22 or later.";
  return [
    'Package: gatewayd',
    `Version: ${o.version}`,
    `Architecture: ${o.target.arch}`,
    `Maintainer: ${MAINTAINER}`,
    `Installed-Size: ${o.installedSizeKiB}`,
    `Depends: ${depends.join(', ')}`,
    'Section: net',
    'Priority: optional',
    'Description: access management, MQTT broker and protocol mapping for gateways',
    ' gatewayd is one daemon for industrial edge gateways: users, roles,',
    ' permissions, sessions, MFA, LDAP and OpenID Connect sign-in, certificates,',
    ' backup and restore; an embedded MQTT broker whose authorization asks the',
    ' same permission engine as the REST API; and protocol mapping onto that',
    ' broker: Siemens S7 (S7-300/400, S7-1200/1500), EtherNet/IP (Allen-Bradley',
    ' Logix tags), Modbus TCP and RTU, OPC UA client and server, Sparkplug B edge',
    ' nodes, MQTT bridges and HTTP polling.',
    ' .',
    ' It runs as the systemd service gatewayd under its own system user, with',
    ' its configuration in /etc/gatewayd and its data in /var/lib/gatewayd.',
    node,
    '',
  ].join('\n');
}

export function copyrightText(bundledNode: string | undefined, year: number): string {
  const parts = [
    'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/',
    'Upstream-Name: gatewayd',
    '',
    'Files: *',
    `Copyright: ${year} the gatewayd authors`,
    'License: Apache-2.0',
    ' On Debian systems the full text of the Apache License 2.0 is in',
    ' /usr/share/common-licenses/Apache-2.0.',
    '',
    'Files: usr/lib/gatewayd/node_modules/*',
    'Copyright: the authors of each module',
    'License: various',
    ' Each module in /usr/lib/gatewayd/node_modules carries its license (the "license"',
    ' field of its package.json, and its LICENSE file where it has one): MIT, ISC,',
    ' BSD-2-Clause, BSD-3-Clause, Apache-2.0 and compatible licenses.',
  ];
  if (bundledNode) {
    parts.push(
      '',
      'Files: usr/lib/gatewayd/node/*',
      'Copyright: Node.js contributors and the authors of the components it includes',
      'License: Node.js',
      ` The official Node.js ${bundledNode} binary. Its license (MIT) and those of the`,
      ' components it includes are in /usr/lib/gatewayd/node/LICENSE.',
    );
  }
  return parts.join('\n') + '\n';
}

/**
 * The package's lintian overrides (/usr/share/lintian/overrides/gatewayd), each with its reason.
 * The native binaries are shipped byte for byte as their projects published them (the npm
 * lockfile's integrity hashes and the official Node release vouch for exactly those files).
 */
export function lintianOverridesText(bundledNode: boolean): string {
  const lines = [
    '# The prebuilt LMDB and msgpackr binaries are shipped exactly as published (npm integrity).',
    'gatewayd: unstripped-binary-or-object [usr/lib/gatewayd/node_modules/*]',
    '# Files of npm modules that start with #! but are library code or tools gatewayd never runs.',
    'gatewayd: script-not-executable [usr/lib/gatewayd/*]',
    '# async is a dependency of winston, installed from the lockfile like every other module.',
    'gatewayd: embedded-javascript-library please use libjs-async [usr/lib/gatewayd/node_modules/*]',
  ];
  if (bundledNode) {
    lines.push(
      '# The official Node.js binary, as the Node.js project builds and tests it: statically',
      '# linked zlib, not position independent, not stripped.',
      'gatewayd: unstripped-binary-or-object [usr/lib/gatewayd/node/bin/node]',
      'gatewayd: embedded-library zlib [usr/lib/gatewayd/node/bin/node]',
      'gatewayd: hardening-no-pie [usr/lib/gatewayd/node/bin/node]',
      "# Modules' command-line tools (#!/usr/bin/env node) that gatewayd never runs; gatewayd",
      '# itself runs on the bundled node, so the package does not depend on nodejs.',
      'gatewayd: missing-dep-for-interpreter node (does not satisfy nodejs:any) [usr/lib/gatewayd/node_modules/*]',
    );
  }
  return lines.join('\n') + '\n';
}

/** A changelog entry for this version (the package is built from the repository, not from a Debian source package). */
export function changelogText(version: string): string {
  const epoch = process.env.SOURCE_DATE_EPOCH ? Number(process.env.SOURCE_DATE_EPOCH) * 1000 : Date.now();
  const date = new Date(epoch).toUTCString().replace('GMT', '+0000');
  return `gatewayd (${version}) stable; urgency=medium\n\n  * Built from the gatewayd repository with npm run package.\n\n -- ${MAINTAINER}  ${date}\n`;
}
