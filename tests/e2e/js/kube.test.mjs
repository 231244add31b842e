// The unmodified e2b SDK against sandbox-apiserver's e2b surface (behind a
// real kube-apiserver, claiming from a simulated sandboxd fleet) and
// sandbox-envd-proxy, the data plane.
//
// Harness variables: E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN and
// E2B_API_KEY (a key of namespace E2E_NAMESPACE); E2E_OTHER_KEY (a key of
// another namespace); E2E_TEMPLATE (a pool image named directly, not by
// alias); E2E_REPORT (where to write facts for the harness).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, AuthenticationError, NotFoundError, SandboxError, SandboxNotFoundError } from 'e2b'
import { env, rawApi, fetchAsWildcardHost, allPages, report, near } from './lib.mjs'

const otherKey = env('E2E_OTHER_KEY')
const domain = env('E2B_DOMAIN')
const idPattern = /^sb-[0-9a-z][0-9a-z-]*$/

const created = []
async function create(...args) {
  const sbx = await Sandbox.create(...args)
  created.push(sbx)
  return sbx
}

test.after(async () => {
  // The sandbox kept for the harness's Kubernetes check stays; any other
  // sandbox a failed test left behind is released.
  for (const sbx of created) {
    if (sbx.sandboxId !== kept?.sandboxId) await sbx.kill().catch(() => {})
  }
})

let kept

test('create by the default alias returns a DNS-safe id, the domain and an envd token', async () => {
  const sbx = await create({ metadata: { suite: 'kube', case: 'alias' }, timeoutMs: 120_000 })
  assert.match(sbx.sandboxId, idPattern)
  assert.equal(sbx.sandboxDomain, domain)
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.state, 'running')
  assert.deepEqual(info.metadata, { suite: 'kube', case: 'alias' })
  near(info.endAt.getTime(), Date.now() + 120_000, 30_000, 'endAt of a 120 s create')
  assert.ok(info.envdVersion, 'envdVersion is reported')
  kept = sbx
  report({ keptId: sbx.sandboxId })
})

test('create by template names the pool image directly', async () => {
  const sbx = await create(env('E2E_TEMPLATE'), { timeoutMs: 60_000 })
  const info = await sbx.getInfo()
  assert.equal(info.templateId, env('E2E_TEMPLATE'))
  await sbx.kill()
})

test('env vars given at create reach the guest', async () => {
  const sbx = await create({ envs: { E2E_GREETING: 'from-create' } })
  const r = await sbx.commands.run('echo "$E2E_GREETING"')
  assert.equal(r.stdout.trim(), 'from-create')
  await sbx.kill()
})

test('list shows the namespace\'s sandboxes, filters by metadata and state, and pages', async () => {
  const a = await create({ metadata: { suite: 'kube', case: 'list' } })
  const b = await create({ metadata: { suite: 'kube', case: 'list' } })
  const listed = await allPages(Sandbox.list({ query: { metadata: { case: 'list' } } }))
  assert.deepEqual(listed.map((s) => s.sandboxId).sort(), [a.sandboxId, b.sandboxId].sort())
  for (const s of listed) assert.equal(s.state, 'running')

  // One per page: two pages, then no more.
  const paginator = Sandbox.list({ query: { metadata: { case: 'list' } }, limit: 1 })
  const first = await paginator.nextItems()
  assert.equal(first.length, 1)
  assert.ok(paginator.hasNext, 'a second page is announced')
  const second = await paginator.nextItems()
  assert.equal(second.length, 1)
  assert.notEqual(first[0].sandboxId, second[0].sandboxId)
  assert.equal(paginator.hasNext, false)

  const paused = await allPages(Sandbox.list({ query: { metadata: { case: 'list' }, state: ['paused'] } }))
  assert.equal(paused.length, 0)

  // The v1 list the SDK no longer uses answers too.
  const v1 = await rawApi('GET', '/sandboxes', { key: env('E2B_API_KEY') })
  assert.equal(v1.status, 200)
  assert.ok(v1.json.some((s) => s.sandboxID === a.sandboxId))
  await a.kill()
  await b.kill()
})

test('setTimeout renews the lease on the node', async () => {
  const sbx = await create({ timeoutMs: 60_000 })
  await sbx.setTimeout(600_000)
  const info = await sbx.getInfo()
  near(info.endAt.getTime(), Date.now() + 600_000, 30_000, 'endAt after setTimeout(600 s)')
  await sbx.kill()
})

test('pause, pause again, then connect wakes the sandbox', async () => {
  // Only the isolated lane hibernates: sandboxd keeps internet-facing
  // (egress-lane) sandboxes live from claim to release.
  const sbx = await create({ allowInternetAccess: false })
  await sbx.files.write('state.txt', 'kept across pause')
  assert.equal(await sbx.pause(), true)
  assert.equal(await sbx.pause(), false, 'pausing a paused sandbox reports false (409)')
  assert.equal((await sbx.getInfo()).state, 'paused')
  const paused = await allPages(Sandbox.list({ query: { state: ['paused'] } }))
  assert.ok(paused.some((s) => s.sandboxId === sbx.sandboxId))

  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await again.getInfo()).state, 'running')
  assert.equal(await again.files.read('state.txt'), 'kept across pause')
  await again.kill()
})

// waitPaused polls getInfo until the node has archived the sandbox at its
// timeout (sandboxd reaps expired leases every second in the simulator).
async function waitPaused (sbx) {
  const deadline = Date.now() + 60_000
  while ((await sbx.getInfo()).state !== 'paused') {
    assert.ok(Date.now() < deadline, 'the sandbox was not paused at its timeout')
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
}

test('lifecycle onTimeout "pause" archives the sandbox at its timeout; connect wakes it with its files', async () => {
  // The node itself archives the sandbox when the lease ends (the claim's
  // on_expire "archive"): nothing in the server is scheduled.
  const sbx = await create({ allowInternetAccess: false, timeoutMs: 4_000, lifecycle: { onTimeout: 'pause' } })
  await sbx.files.write('auto.txt', 'survives the archive')
  await waitPaused(sbx)
  // The node archived it on its own, so lists (read from the nodes'
  // published inventory) show it paused from the node's next publish on.
  const listedBy = Date.now() + 30_000
  while (!(await allPages(Sandbox.list({ query: { state: ['paused'] } }))).some((s) => s.sandboxId === sbx.sandboxId)) {
    assert.ok(Date.now() < listedBy, 'an archived sandbox is not listed as paused after its node published')
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  await assert.rejects(sbx.files.read('auto.txt'), 'traffic to an archived sandbox without autoResume is refused')
  assert.equal((await sbx.getInfo()).state, 'paused', 'traffic woke an archived sandbox created without autoResume')
  const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 60_000 })
  assert.equal((await again.getInfo()).state, 'running')
  assert.equal(await again.files.read('auto.txt'), 'survives the archive')
  await again.kill()
})

test('with autoResume, a request through the envd proxy wakes a sandbox archived at its timeout', async () => {
  const sbx = await create({ allowInternetAccess: false, timeoutMs: 4_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  await sbx.files.write('woken.txt', 'woken from the archive')
  await waitPaused(sbx)
  assert.equal(await sbx.files.read('woken.txt'), 'woken from the archive')
  const info = await sbx.getInfo()
  assert.equal(info.state, 'running', 'the request through the data plane woke it')
  assert.ok(info.endAt.getTime() > Date.now(), 'the wake granted a fresh lease')
  await sbx.kill()
})

test('fork makes two sandboxes with the parent\'s files and metadata; the parent keeps running', async () => {
  // sandboxd forks only isolated-lane sandboxes.
  const parent = await create({ allowInternetAccess: false, metadata: { suite: 'kube', case: 'fork' } })
  await parent.files.write('forked.txt', 'written before the fork')
  const children = await parent.fork({ count: 2, timeoutMs: 120_000 })
  assert.equal(children.length, 2)
  const ids = new Set([parent.sandboxId])
  for (const child of children) {
    assert.ok(!(child instanceof Error), `a fork child failed: ${child?.message}`)
    created.push(child)
    assert.ok(!ids.has(child.sandboxId), `fork child ${child.sandboxId} repeats an id`)
    ids.add(child.sandboxId)
    assert.equal(await child.files.read('forked.txt'), 'written before the fork')
    const info = await child.getInfo()
    assert.equal(info.state, 'running')
    assert.deepEqual(info.metadata, { suite: 'kube', case: 'fork' })
    near(info.endAt.getTime(), Date.now() + 120_000, 30_000, 'endAt of a 120 s fork child')
  }
  assert.equal((await parent.getInfo()).state, 'running')
  await assert.rejects(parent.fork({ count: 17 }), SandboxError)
  for (const child of children) await child.kill()
  await parent.kill()
})

test('a paused sandbox stays paused under traffic; with autoResume, traffic wakes it', async () => {
  const still = await create({ allowInternetAccess: false })
  await still.files.write('kept.txt', 'kept across pause')
  assert.equal(await still.pause(), true)
  await assert.rejects(still.files.read('kept.txt'), 'traffic to a paused sandbox without autoResume is refused')
  assert.equal((await still.getInfo()).state, 'paused', 'traffic woke a sandbox created without autoResume')
  const again = await Sandbox.connect(still.sandboxId)
  assert.equal(await again.files.read('kept.txt'), 'kept across pause')
  await again.kill()

  const woken = await create({ allowInternetAccess: false, timeoutMs: 600_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  assert.deepEqual((await woken.getInfo()).lifecycle, { onTimeout: 'pause', autoResume: true })
  await woken.files.write('woken.txt', 'woken by traffic')
  assert.equal(await woken.pause(), true)
  assert.equal((await woken.getInfo()).state, 'paused')
  assert.equal(await woken.files.read('woken.txt'), 'woken by traffic')
  assert.equal((await woken.getInfo()).state, 'running', 'the request through the data plane woke it')
  await woken.kill()
})

test('pausing a sandbox with internet access is refused, and it keeps running', async () => {
  const sbx = await create()
  await assert.rejects(sbx.pause(), (err) => err instanceof SandboxError && /allowInternetAccess: false/.test(err.message))
  assert.equal((await sbx.getInfo()).state, 'running')
  assert.equal((await sbx.commands.run('echo still')).stdout, 'still\n')
  await sbx.kill()
})

test('commands, files and a signed download URL go through the envd proxy', async () => {
  const sbx = await create()
  const r = await sbx.commands.run('echo hello')
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'hello\n')

  await sbx.files.write('/home/user/notes/hello.txt', 'hello, file')
  assert.equal(await sbx.files.read('/home/user/notes/hello.txt'), 'hello, file')

  // A download URL is fetched by anything (a browser, curl): plain HTTP,
  // no X-Access-Token, no e2b headers; the host name picks the sandbox.
  const url = await sbx.downloadUrl('/home/user/notes/hello.txt')
  assert.ok(new URL(url).searchParams.get('signature'), 'the URL is signed')
  const host = `49983-${sbx.sandboxId}.${domain}`
  // getHost is the host the proxy routes by: the same name reaches envd.
  assert.equal(sbx.getHost(49983), host)
  const got = await fetchAsWildcardHost(url, host)
  assert.equal(got.status, 200)
  assert.equal(got.body, 'hello, file')

  // Tampering with the signature is refused by envd, through the proxy.
  const bad = new URL(url)
  bad.searchParams.set('signature', 'v1_AAAA')
  assert.equal((await fetchAsWildcardHost(bad.toString(), host)).status, 401)
  await sbx.kill()
})

test('a pty runs an interactive shell through the envd proxy: input, resize, kill', async () => {
  const sbx = await create()
  const decoder = new TextDecoder()
  const encoder = new TextEncoder()
  let out = ''
  const handle = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += decoder.decode(d, { stream: true }) } })
  const waitFor = async (text) => {
    const deadline = Date.now() + 30_000
    while (!out.includes(text)) {
      assert.ok(Date.now() < deadline, `the terminal never showed ${JSON.stringify(text)}; it showed ${JSON.stringify(out.slice(-400))}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  // The arithmetic proves a shell ran the line: the input itself never
  // holds the answer.
  await sbx.pty.sendInput(handle.pid, encoder.encode('echo pty-$((6*7))\n'))
  await waitFor('pty-42')
  await sbx.pty.resize(handle.pid, { cols: 100, rows: 30 })
  await sbx.pty.sendInput(handle.pid, encoder.encode('stty size\n'))
  await waitFor('30 100')
  assert.equal(await sbx.pty.kill(handle.pid), true)
  await sbx.kill()
})

test('metrics answer for a running sandbox', async () => {
  const sbx = await create()
  const metrics = await sbx.getMetrics()
  assert.ok(Array.isArray(metrics))
  assert.ok(metrics.length >= 1)
  assert.ok(metrics[0].cpuCount >= 1)
  await sbx.kill()
})

test('kill releases the sandbox; a second kill reports it gone', async () => {
  const sbx = await create()
  assert.equal(await sbx.kill(), true)
  assert.equal(await Sandbox.kill(sbx.sandboxId), false)
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId), SandboxNotFoundError)
})

test('a wrong key is refused with AuthenticationError', async () => {
  await assert.rejects(Sandbox.create({ apiKey: 'e2b_not_a_key' }), AuthenticationError)
  await assert.rejects(allPages(Sandbox.list({ apiKey: 'e2b_not_a_key' })), AuthenticationError)
})

test('anonymous requests are refused', async () => {
  for (const [method, path] of [['POST', '/sandboxes'], ['GET', '/v2/sandboxes'], ['GET', '/sandboxes']]) {
    const res = await rawApi(method, path, { body: method === 'POST' ? { templateID: 'base' } : undefined })
    assert.equal(res.status, 401, `${method} ${path} without a key`)
    assert.equal(res.json?.code, 401)
  }
  const health = await fetch(env('E2B_API_URL') + '/health')
  assert.ok(health.ok, '/health needs no key')
})

test('another namespace\'s key cannot see or touch the sandbox, and cannot tell it exists', async () => {
  const sbx = await create({ metadata: { case: 'isolation' } })
  const theirs = await allPages(Sandbox.list({ apiKey: otherKey }))
  assert.ok(!theirs.some((s) => s.sandboxId === sbx.sandboxId))
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId, { apiKey: otherKey }), SandboxNotFoundError)
  await assert.rejects(Sandbox.connect(sbx.sandboxId, { apiKey: otherKey }), NotFoundError)
  assert.equal(await Sandbox.kill(sbx.sandboxId, { apiKey: otherKey }), false)

  // Byte for byte the answer for an id that never existed.
  const unknown = sbx.sandboxId.replace(/.$/, (c) => (c === '0' ? '1' : '0'))
  const a = await rawApi('GET', `/sandboxes/${sbx.sandboxId}`, { key: otherKey })
  const b = await rawApi('GET', `/sandboxes/${unknown}`, { key: otherKey })
  assert.equal(a.status, 404)
  assert.equal(b.status, 404)
  assert.equal(a.text.replaceAll(sbx.sandboxId, 'ID'), b.text.replaceAll(unknown, 'ID'))

  // Still alive for its owner.
  assert.equal((await sbx.getInfo()).state, 'running')
  await sbx.kill()
})

test('both id spellings are accepted', async () => {
  const sbx = await create()
  const underscore = sbx.sandboxId.replace(/^sb-/, 'sb_')
  const res = await rawApi('GET', `/sandboxes/${underscore}`, { key: env('E2B_API_KEY') })
  assert.equal(res.status, 200)
  assert.equal(res.json.sandboxID, sbx.sandboxId)
  await sbx.kill()
})
