// What one sandbox may take from the machine it shares with others (issue
// 28), tried from inside through the unmodified e2b SDK against
// sandbox-e2b-local, as the adversarial probe did: each attempt is refused
// or bounded, and the sandbox that made it keeps working.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { statfsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { Sandbox } from 'e2b'

// run runs cmd and returns its stdout whatever its exit code.
async function run(sbx, cmd, opts = {}) {
  try {
    return (await sbx.commands.run(cmd, { timeoutMs: 120_000, ...opts })).stdout
  } catch (err) {
    if (err.result === undefined && err.stdout === undefined) throw err
    return err.stdout ?? err.result.stdout
  }
}

const py = (src) => `python3 - <<'PY'\n${src}\nPY`

// The kernel keyring through the raw system call (no keyutils in the
// image): add_key is 248 on x86-64, 217 on arm64.
const addKey = py(`
import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = {'x86_64': 248, 'aarch64': 217}[platform.machine()]
r = libc.syscall(nr, b'user', b'probe-limits-test', b'secret', 6, ctypes.c_int(-4))
print('add_key', 'ok' if r >= 0 else os.strerror(ctypes.get_errno()))
`)

test('the kernel keyring is closed to every user inside', async () => {
  const [a, b] = [await Sandbox.create(), await Sandbox.create()]
  try {
    for (const user of ['root', 'user']) {
      assert.match(await run(a, addKey, { user }), /add_key Operation not permitted/, `as ${user}`)
    }
    const read = await run(b, 'cat /proc/keys 2>&1; echo end', { user: 'root' })
    assert.doesNotMatch(read, /probe-limits-test|keyring/, "the host's or another sandbox's keys are visible")
  } finally {
    await Promise.all([a.kill(), b.kill()])
  }
})

test('root inside cannot reach the host cgroup files, open raw sockets or make namespaces', async () => {
  const sbx = await Sandbox.create()
  try {
    const fds = await run(sbx, 'ls -l /proc/[0-9]*/fd 2>/dev/null | grep -c cgroup; true', { user: 'root' })
    assert.equal(fds.trim(), '0', 'a descriptor on a cgroup file is reachable inside')
    const raw = await run(sbx, py(`
import socket
for name, args in [('packet', (socket.AF_PACKET, socket.SOCK_RAW)), ('raw', (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))]:
    try:
        socket.socket(*args); print(name, 'ok')
    except OSError as e:
        print(name, e.strerror)
`), { user: 'root' })
    assert.match(raw, /packet Operation not permitted/)
    assert.match(raw, /raw Operation not permitted/)
    const ns = await run(sbx, 'unshare -U true 2>&1; echo exit=$?', { user: 'user' })
    assert.match(ns, /exit=[1-9]/, `unshare -U inside: ${ns}`)
  } finally {
    await sbx.kill()
  }
})

test('5 000 processes stop at the pids limit and the sandbox goes on', async () => {
  const sbx = await Sandbox.create()
  try {
    const out = await run(sbx, py(`
import os, time
pids, err = [], None
r, w = os.pipe()
for _ in range(5000):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.strerror; break
    if pid == 0:
        os.close(w); os.read(r, 1); os._exit(0)
    pids.append(pid)
os.close(w)
for p in pids: os.waitpid(p, 0)
print('forked', len(pids), err)
`))
    const [, n, why] = out.match(/forked (\d+) (.*)/) ?? []
    assert.ok(Number(n) < 5000 && Number(n) <= 512, `forked ${n}`)
    assert.match(why, /Resource temporarily unavailable/)
    assert.equal((await sbx.commands.run('echo alive')).stdout.trim(), 'alive')
  } finally {
    await sbx.kill()
  }
})

test('a 2 GB write stops at the disk bound; full tmpfs mounts get ENOSPC, not death', async () => {
  const sbx = await Sandbox.create()
  const free = () => { const s = statfsSync(tmpdir()); return s.bavail * s.bsize }
  const before = free()
  try {
    const size = await run(sbx, 'df -m --output=size /home/user | tail -1')
    assert.ok(Number(size) <= 2048, `the disk is ${size} MiB`)
    const big = await run(sbx, 'dd if=/dev/zero of=big bs=1M count=2100 2>&1; echo exit=$?')
    assert.match(big, /No space left on device/)
    assert.match(big, /exit=1/)
    // The host lost at most the bound (and a margin for its own writes).
    assert.ok(before - free() < 2.3 * 2 ** 30, `the host's free disk fell by ${(before - free()) / 2 ** 20} MiB`)
    await sbx.commands.run('rm big')
    for (const dir of ['/tmp', '/dev/shm']) {
      const out = await run(sbx, `dd if=/dev/zero of=${dir}/fill bs=1M count=2000 2>&1; echo exit=$?`)
      assert.match(out, /No space left on device/, dir)
      const copied = Number((out.match(/(\d+) bytes/) ?? [])[1])
      assert.ok(copied <= 256 * 2 ** 20, `${dir} took ${copied} bytes`)
    }
    assert.equal((await sbx.commands.run('echo alive')).stdout.trim(), 'alive')
    assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, 'running')
  } finally {
    await sbx.kill()
  }
})
