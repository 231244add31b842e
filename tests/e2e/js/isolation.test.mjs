// The unmodified e2b SDK against the README's main job (sandbox-e2b-local):
// every sandbox is its own machine. The Go harness (tests/e2e/isolation)
// checks the host side afterwards: nothing the sandboxes wrote is on the
// host outside their own directories, and no process of theirs is left.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { CommandExitError, Sandbox, Volume } from 'e2b'
import { env } from './lib.mjs'

const marker = env('E2E_MARKER')

// fetchPort fetches path from the sandbox's port through the data plane
// (E2B_SANDBOX_URL and the sandbox and port headers), retrying while
// nothing listens there yet (502).
async function fetchPort(sbx, port, path) {
  const headers = {
    'E2b-Sandbox-Id': sbx.sandboxId,
    'E2b-Sandbox-Port': String(port),
    'X-Access-Token': sbx.envdAccessToken,
  }
  for (let i = 0; ; i++) {
    const res = await fetch(env('E2B_SANDBOX_URL') + path, { headers })
    if (res.ok) return res.text()
    assert.ok(res.status === 502 && i < 100, `port ${port} answered ${res.status}`)
    await sleep(100)
  }
}

async function exitCodeOf(sbx, cmd) {
  try {
    return (await sbx.commands.run(cmd)).exitCode
  } catch (err) {
    return err.exitCode ?? -1
  }
}

test('a command sees its own machine, and not the host', async () => {
  const sbx = await Sandbox.create()
  try {
    const r = await sbx.commands.run('pwd; id -un; hostname; ls /')
    const [cwd, user, hostname, ...root] = r.stdout.trim().split('\n')
    assert.equal(cwd, '/home/user')
    assert.equal(user, 'user')
    assert.equal(hostname, sbx.sandboxId)
    for (const dir of ['bin', 'etc', 'home', 'usr']) assert.ok(root.includes(dir), `ls / = ${root}`)
    // Writes land in the sandbox's own layer (the harness checks the
    // host's /tmp and /home/user afterwards).
    await sbx.commands.run(`echo inside > /home/user/${marker} && echo inside > /tmp/${marker}`)
    assert.notEqual(await exitCodeOf(sbx, `cat ${env('E2E_HOST_FILE')}`), 0, 'a host file is readable inside')
    // Nothing of the system it runs in answers from inside.
    assert.notEqual(await exitCodeOf(sbx, `curl -sS -m 3 ${env('E2B_API_URL')}/health`), 0, 'the e2b API answers from inside')
  } finally {
    await sbx.kill()
  }
})

test('two sandboxes each serve their own port 8000 through the data plane', async () => {
  const pair = [await Sandbox.create(), await Sandbox.create()]
  try {
    for (const sbx of pair) {
      await sbx.files.write(`/home/user/${marker}/index.html`, sbx.sandboxId)
      await sbx.commands.run(`python3 -m http.server 8000 --directory /home/user/${marker}`, { background: true })
    }
    for (const sbx of pair) assert.equal(await fetchPort(sbx, 8000, '/index.html'), sbx.sandboxId)
  } finally {
    for (const sbx of pair) await sbx.kill()
  }
})

test('pause stops a running loop and resume continues it', async () => {
  // Only the isolated lane hibernates (sandboxd keeps egress-lane sandboxes live).
  const sbx = await Sandbox.create({ allowInternetAccess: false })
  const count = async (s) => (await s.files.read('/home/user/count')).split('\n').length - 1
  try {
    // Detached, so no command stream stays open: traffic to a paused
    // sandbox with its own token wakes it, as on sandboxd.
    await sbx.commands.run(`(while :; do echo ${marker} >> /home/user/count; sleep 0.1; done) >/dev/null 2>&1 &`)
    await sleep(500)
    const before = await count(sbx)
    assert.ok(before > 0, 'the loop never ran')
    assert.equal(await sbx.pause(), true)
    await sleep(2000) // twenty turns of the loop, were it running
    const again = await Sandbox.connect(sbx.sandboxId)
    const after = await count(again)
    assert.ok(after - before < 10, `the loop ran on while paused: ${before} → ${after}`)
    await sleep(1000)
    assert.ok((await count(again)) > after, 'the loop did not continue after resume')
  } finally {
    await sbx.kill()
  }
})

test('Volume.list shows the catalog; a sandbox sees a catalog volume at its path, read-only unless writable', async () => {
  const names = (await Volume.list()).map((v) => v.name).sort()
  assert.deepEqual(names, ['datasets', 'scratch'])
  const sbx = await Sandbox.create({ allowInternetAccess: false, volumeMounts: { '/data': 'datasets', '/work/out': 'scratch' } })
  try {
    assert.equal((await sbx.commands.run('cat /data/hello.txt')).stdout.trim(), env('E2E_VOLUME_TEXT'))
    await assert.rejects(sbx.commands.run(`touch /data/${marker}`), CommandExitError, 'a read-only volume took a write')
    await sbx.commands.run(`echo ${marker} > /work/out/from-sandbox.txt`)
    const info = await sbx.getInfo()
    assert.deepEqual(info.volumeMounts?.map((m) => [m.name, m.path]).sort(), [['datasets', '/data'], ['scratch', '/work/out']])
    await assert.rejects(sbx.pause(), /volume/, 'a sandbox with volumes cannot be paused')
  } finally {
    await sbx.kill()
  }
  await assert.rejects(Sandbox.create({ allowInternetAccess: false, volumeMounts: { '/x': 'not-in-the-catalog' } }), /catalog/)
})
