/**
 * The command that starts a Node child process of the daemon (the store check of a restore):
 * this process's own Node, behind the launcher named by GATEWAYD_NODE_LAUNCHER if set.
 *
 * The launcher exists for emulation: under qemu-user without binfmt_misc (an ARM gatewayd run
 * on an x86 machine, as the platform suite does), the kernel cannot execute the ARM Node binary
 * that process.execPath names, so each child must start through the emulator as the daemon did:
 * GATEWAYD_NODE_LAUNCHER='["qemu-aarch64-static","-L","/sysroot"]' (a JSON array of words,
 * or words separated by spaces). On real hardware it stays unset.
 */
export function nodeCommand(env: NodeJS.ProcessEnv = process.env): { command: string; prefix: string[] } {
  const launcher = env.GATEWAYD_NODE_LAUNCHER?.trim();
  if (!launcher) return { command: process.execPath, prefix: [] };
  const words = launcher.startsWith('[') ? (JSON.parse(launcher) as unknown[]).map(String) : launcher.split(/\s+/);
  return { command: words[0]!, prefix: [...words.slice(1), process.execPath] };
}
