// The unmodified e2b SDK against sandbox-e2b on a simulated sandboxd mesh of
// three nodes (see tests/e2e/mesh). The harness's control endpoint
// (E2E_CONTROL_URL) tells which node owns a sandbox, counts a node's
// redirects, takes a node's warm VMs behind the mesh's back and kills nodes.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { Sandbox, SandboxNotFoundError } from 'e2b'
import { env, allPages } from './lib.mjs'

const control = env('E2E_CONTROL_URL')

async function ctl(method, path) {
  const res = await fetch(control + path, { method })
  assert.ok(res.ok || res.status === 404, `control ${method} ${path}: ${res.status} ${await res.clone().text()}`)
  return res.status === 204 || res.status === 404 ? { status: res.status } : { status: res.status, ...(await res.json()) }
}
const ownerOf = async (id) => (await ctl('GET', `/owner?id=${id}`)).node
const redirects = async (node) => (await ctl('GET', `/counters?node=${node}`)).redirects

const live = []
test.after(async () => {
  for (const sbx of live) await sbx.kill().catch(() => {})
})

test('creates spread over the mesh and list shows every node\'s sandboxes', async () => {
  // The mesh picks among warm nodes at random, so keep creating until two
  // nodes are used; twelve creates all landing on one node means the mesh
  // is not spreading (or knows only its seed).
  const made = []
  const owners = new Set()
  while (made.length < 3 || (owners.size < 2 && made.length < 12)) {
    const sbx = await Sandbox.create({ metadata: { suite: 'mesh' } })
    made.push(sbx)
    live.push(sbx)
    owners.add(await ownerOf(sbx.sandboxId))
  }
  assert.ok(owners.size >= 2, `${made.length} creates all landed on node ${[...owners]}`)
  const listed = await allPages(Sandbox.list({ query: { metadata: { suite: 'mesh' } } }))
  assert.deepEqual(listed.map((s) => s.sandboxId).sort(), made.map((s) => s.sandboxId).sort())
})

test('a create that enters a node with no warm VM follows its redirect', async () => {
  // Node 1 has the most warm "solo" VMs in the mesh's view; empty its pool
  // behind the mesh's back, so the next create enters node 1, finds
  // nothing warm and is redirected to node 2.
  await ctl('POST', `/empty-pool?node=1&template=${encodeURIComponent(env('E2E_SOLO_TEMPLATE'))}`)
  const before = await redirects(1)
  const sbx = await Sandbox.create(env('E2E_SOLO_TEMPLATE'))
  live.push(sbx)
  assert.equal(await ownerOf(sbx.sandboxId), 2)
  assert.equal(await redirects(1), before + 1, 'node 1 redirected the claim')
  const r = await sbx.commands.run('echo redirected')
  assert.equal(r.stdout, 'redirected\n')
})

test('commands, files, pause and connect through the in-process data plane', async () => {
  // Pausing needs the isolated lane (egress-lane sandboxes stay live).
  const sbx = await Sandbox.create({ allowInternetAccess: false })
  live.push(sbx)
  const r = await sbx.commands.run('echo hello')
  assert.equal(r.stdout, 'hello\n')
  await sbx.files.write('/home/user/mesh.txt', 'on the mesh')
  assert.equal(await sbx.files.read('/home/user/mesh.txt'), 'on the mesh')

  assert.equal(await sbx.pause(), true)
  assert.equal((await sbx.getInfo()).state, 'paused')
  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await again.getInfo()).state, 'running')
  assert.equal(await again.files.read('/home/user/mesh.txt'), 'on the mesh')
})

test('fork makes two sandboxes with the parent\'s files on the parent\'s node', async () => {
  const parent = await Sandbox.create({ allowInternetAccess: false, metadata: { suite: 'mesh-fork' } })
  live.push(parent)
  await parent.files.write('forked.txt', 'written before the fork')
  const children = await parent.fork({ count: 2 })
  assert.equal(children.length, 2)
  for (const child of children) {
    assert.ok(!(child instanceof Error), `a fork child failed: ${child?.message}`)
    live.push(child)
    assert.equal(await ownerOf(child.sandboxId), await ownerOf(parent.sandboxId), 'a fork child lives on its parent\'s node')
    assert.equal(await child.files.read('forked.txt'), 'written before the fork')
    assert.deepEqual((await child.getInfo()).metadata, { suite: 'mesh-fork' })
  }
  for (const sbx of [...children, parent]) assert.equal(await sbx.kill(), true)
})

test('through the in-process data plane a paused sandbox wakes on traffic only with autoResume', async () => {
  const still = await Sandbox.create({ allowInternetAccess: false })
  live.push(still)
  assert.equal(await still.pause(), true)
  await assert.rejects(still.commands.run('echo no'), 'traffic to a paused sandbox without autoResume is refused')
  assert.equal((await still.getInfo()).state, 'paused')

  const woken = await Sandbox.create({ allowInternetAccess: false, timeoutMs: 600_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  live.push(woken)
  assert.equal(await woken.pause(), true)
  assert.equal((await woken.commands.run('echo woke')).stdout, 'woke\n')
  assert.equal((await woken.getInfo()).state, 'running')
  for (const sbx of [still, woken]) assert.equal(await sbx.kill(), true)
})

test('a sandbox archived at its timeout wakes on traffic with autoResume and stays paused without', async () => {
  const still = await Sandbox.create({ allowInternetAccess: false, timeoutMs: 4_000, lifecycle: { onTimeout: 'pause' } })
  live.push(still)
  const woken = await Sandbox.create({ allowInternetAccess: false, timeoutMs: 4_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  live.push(woken)
  await woken.files.write('woken.txt', 'woken from the archive')
  const deadline = Date.now() + 60_000
  for (const sbx of [still, woken]) {
    while ((await sbx.getInfo()).state !== 'paused') {
      assert.ok(Date.now() < deadline, 'the sandbox was not archived at its timeout')
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  }
  await assert.rejects(still.commands.run('echo no'), 'traffic to an archived sandbox without autoResume is refused')
  assert.equal((await still.getInfo()).state, 'paused')
  assert.equal(await woken.files.read('woken.txt'), 'woken from the archive')
  assert.equal((await woken.getInfo()).state, 'running')
  for (const sbx of [still, woken]) assert.equal(await sbx.kill(), true)
})

test('kill releases a sandbox on its node', async () => {
  const sbx = await Sandbox.create()
  const owner = await ownerOf(sbx.sandboxId)
  assert.equal(await sbx.kill(), true)
  assert.equal((await ctl('GET', `/owner?id=${sbx.sandboxId}`)).status, 404, `node ${owner} still lists it`)
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId), SandboxNotFoundError)
})

test('a node killed mid-run leaves the view; the rest keep working', async () => {
  const listed = await allPages(Sandbox.list())
  const byNode = new Map()
  for (const s of listed) {
    const n = await ownerOf(s.sandboxId)
    byNode.set(n, [...(byNode.get(n) ?? []), s.sandboxId])
  }
  assert.ok((byNode.get(2) ?? []).length > 0, 'node 2 holds sandboxes before it dies')
  const survivors = [...byNode.entries()].filter(([n]) => n !== 2).flatMap(([, ids]) => ids)
  assert.ok(survivors.length > 0, 'other nodes hold sandboxes too')

  await ctl('POST', '/kill?node=2')

  // The dead node's sandboxes stop being listed (a list asks every node;
  // one that does not answer contributes nothing), and every survivor
  // still is.
  const deadline = Date.now() + 60_000
  let ids
  for (;;) {
    ids = new Set((await allPages(Sandbox.list())).map((s) => s.sandboxId))
    if (!byNode.get(2).some((id) => ids.has(id))) break
    assert.ok(Date.now() < deadline, `node 2's sandboxes are still listed: ${byNode.get(2)}`)
    await sleep(500)
  }
  for (const id of survivors) assert.ok(ids.has(id), `survivor ${id} is still listed`)

  // Survivors still run commands, and creates still succeed.
  const survivor = await Sandbox.connect(survivors[0])
  assert.equal((await survivor.commands.run('echo still here')).stdout, 'still here\n')
  const fresh = await Sandbox.create()
  live.push(fresh)
  assert.notEqual(await ownerOf(fresh.sandboxId), 2)
  assert.equal((await fresh.commands.run('echo new')).stdout, 'new\n')
})
