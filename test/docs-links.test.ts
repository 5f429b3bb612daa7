// The documentation's links resolve (issue 30 point 5): every relative link and #anchor in
// README.md, docs/*.md and the parts' src/**/README.md points at a file that exists and, for an
// anchor, at a heading of that file (GitHub's slugs); every `docs/<page>.md "Section"` and
// `docs/design.md §N` that code, tests, the UI and scripts cite names a page and a section that
// exist. And the README stays a landing page.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** The anchor GitHub gives a heading: lower case, punctuation dropped, each space a hyphen. */
export function headingSlug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The text outside fenced code blocks, line by line (code blocks become empty lines). */
function proseLines(markdown: string): string[] {
  let fenced = false;
  return markdown.split('\n').map((line) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      return '';
    }
    return fenced ? '' : line;
  });
}

/** The anchors of a markdown file's headings, with GitHub's -1, -2 … for repeated ones. */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(markdown)) {
    const m = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const slug = headingSlug(m[1]!);
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** Relative link targets of a markdown file (inline code and code blocks left out). */
export function relativeLinks(markdown: string): string[] {
  const targets: string[] = [];
  for (const line of proseLines(markdown)) {
    const prose = line.replace(/`[^`]*`/g, (code) => ' '.repeat(code.length));
    for (const m of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, file:
      targets.push(target);
    }
  }
  return targets;
}

/** What is wrong with the links of one markdown file (empty when every one resolves). */
export function brokenLinks(file: string, markdown: string, readFile: (path: string) => string): string[] {
  const problems: string[] = [];
  for (const target of relativeLinks(markdown)) {
    const [path, anchor] = target.split('#', 2) as [string, string | undefined];
    const goal = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
    const where = `${relative(root, file)}: (${target})`;
    if (path !== '' && !existsSync(goal)) {
      problems.push(`${where} names a file that does not exist`);
      continue;
    }
    if (anchor === undefined) continue;
    if (path !== '' && (statSync(goal).isDirectory() || !goal.endsWith('.md'))) {
      problems.push(`${where} has an anchor into something that is not a markdown file`);
    } else if (!headingAnchors(readFile(goal)).has(anchor)) {
      problems.push(`${where}: no heading of ${relative(root, goal)} has the anchor #${anchor}`);
    }
  }
  return problems;
}

function filesUnder(dir: string, keep: (name: string) => boolean): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...filesUnder(path, keep));
    else if (keep(entry.name)) found.push(path);
  }
  return found;
}

const read = (path: string) => readFileSync(path, 'utf8');

describe('documentation links', () => {
  const markdownFiles = [
    join(root, 'README.md'),
    join(root, 'CHANGELOG.md'),
    ...filesUnder(join(root, 'docs'), (name) => name.endsWith('.md')),
    ...filesUnder(join(root, 'src'), (name) => name === 'README.md'),
  ];

  it('finds the anchors and broken links it should (the checker itself)', () => {
    expect(headingSlug('Single sign-on (OpenID Connect)')).to.equal('single-sign-on-openid-connect');
    expect(headingSlug("15. The gateway's own hardware, and the PLCs")).to.equal('15-the-gateways-own-hardware-and-the-plcs');
    expect([...headingAnchors('# A\n```sh\n# not a heading\n```\n## A\n')]).to.deep.equal(['a', 'a-1']);
    const file = join(root, 'docs', 'example.md');
    const doc = '# Here\n[ok](../README.md#first-steps) [self](#here) `[code](nowhere.md)`\n' +
      '[gone](missing.md) [bad anchor](../README.md#no-such-heading) [web](https://example.com/x)\n';
    expect(brokenLinks(file, doc, (path) => (path === file ? doc : read(path)))).to.deep.equal([
      'docs/example.md: (missing.md) names a file that does not exist',
      'docs/example.md: (../README.md#no-such-heading): no heading of README.md has the anchor #no-such-heading',
    ]);
  });

  it('every relative link and anchor in README.md, CHANGELOG.md, docs/ and src/**/README.md resolves', () => {
    expect(markdownFiles.length).to.be.at.least(15);
    expect(markdownFiles.flatMap((file) => relativeLinks(read(file))).length).to.be.greaterThan(100);
    const problems = markdownFiles.flatMap((file) => brokenLinks(file, read(file), read));
    expect(problems).to.deep.equal([]);
  });

  it('every docs page, section and design § cited in src/, test/, ui/ and scripts/ exists', () => {
    const sources = ['src', 'test', 'ui/src', 'scripts'].flatMap((dir) =>
      filesUnder(join(root, dir), (name) => /\.(ts|tsx|yaml|md|sh)$/.test(name)),
    ).filter((file) => !file.endsWith('docs-links.test.ts')); // this file's examples are made up
    const design = read(join(root, 'docs', 'design.md'));
    const sections = new Set([...design.matchAll(/^## (\d+)\. /gm)].map((m) => m[1]));
    const problems: string[] = [];
    let citations = 0;
    for (const file of sources) {
      const text = read(file);
      // docs/<page>.md, optionally followed by "Section" (which may wrap onto a comment line)
      for (const m of text.matchAll(/docs\/([a-z0-9-]+)\.md(?:,?\s+"([^"]+)")?/g)) {
        citations++;
        const page = join(root, 'docs', `${m[1]}.md`);
        const where = `${relative(root, file)}: ${m[0].replace(/\s+/g, ' ')}`;
        if (!existsSync(page)) {
          problems.push(`${where}: no such page`);
          continue;
        }
        if (m[2] === undefined) continue;
        const section = m[2].replace(/\s*\n\s*(?:\/\/|#|\*)?\s*/g, ' ');
        if (!read(page).replace(/\s+/g, ' ').includes(section)) problems.push(`${where}: the page has no "${section}"`);
      }
      for (const m of text.matchAll(/docs\/design\.md §(\d+)(?:[–-]§(\d+))?/g)) {
        for (const n of [m[1], m[2]].filter((x) => x !== undefined)) {
          if (!sections.has(n)) problems.push(`${relative(root, file)}: docs/design.md §${n} does not exist`);
        }
      }
    }
    expect(citations).to.be.greaterThan(50);
    expect(problems).to.deep.equal([]);
  });

  it('the README stays a landing page of at most about 500 lines', () => {
    const lines = read(join(root, 'README.md')).split('\n').length;
    expect(lines).to.be.at.most(520);
  });
});
