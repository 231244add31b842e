// The unmodified e2b SDK's template build API (Template.build) and
// snapshots against either e2b front: sandbox-apiserver behind a real
// kube-apiserver, or sandbox-e2b on a sandboxd mesh. The Go harness
// (tests/e2e/templates) runs this suite once per front and build store.
//
// Harness variables: E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN and
// E2B_API_KEY; E2E_TEMPLATE_PREFIX (unique per run, starts every template
// name built here); E2E_BUILD_PARALLEL (the server's build slots);
// E2E_UPLOAD_LIMIT (set only when the store refuses uploads above that
// many bytes).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import {
  ApiClient,
  BuildError,
  ConnectionConfig,
  FileUploadError,
  Sandbox,
  Template,
} from 'e2b'
import { env, allPages } from './lib.mjs'

const prefix = env('E2E_TEMPLATE_PREFIX')
const parallel = Number(env('E2E_BUILD_PARALLEL'))
const uploadLimit = process.env.E2E_UPLOAD_LIMIT ? Number(process.env.E2E_UPLOAD_LIMIT) : undefined

// The build context: a directory the COPY steps read from, holding a
// nested file and a file with a space in its name.
const context = mkdtempSync(path.join(tmpdir(), 'e2e-template-context-'))
const files = {
  'nested/deep.txt': 'deep inside the copied tree\n',
  'with space.txt': 'a name with a space\n',
}
for (const [rel, content] of Object.entries(files)) {
  mkdirSync(path.dirname(path.join(context, 'files', rel)), { recursive: true })
  writeFileSync(path.join(context, 'files', rel), content)
}

// Every sandbox made here is killed when its test ends, and again (to be
// sure) when the suite ends.
const live = new Set()
async function create(...args) {
  const sbx = await Sandbox.create(...args)
  live.add(sbx)
  return sbx
}
async function kill(sbx) {
  live.delete(sbx)
  assert.equal(await sbx.kill(), true, `kill of ${sbx.sandboxId} found no sandbox`)
}
test.after(async () => {
  for (const sbx of live) await sbx.kill().catch(() => {})
  rmSync(context, { recursive: true, force: true })
})

function base() {
  return Template({ fileContextPath: context }).fromTemplate('base')
}

// build runs Template.build with a log collector; it resolves to the
// build's result and its logs, or rejects with the SDK's error carrying
// the logs seen so far in err.logs.
async function build(template, name, opts = {}) {
  const logs = []
  try {
    const info = await Template.build(template, name, { ...opts, onBuildLogs: (e) => logs.push(e) })
    return { info, logs }
  } catch (err) {
    err.logs = logs
    throw err
  }
}

function logText(logs) {
  return logs.map((e) => e.message).join('\n')
}

// statusOf is the HTTP status an SDK error carries for a plain API error.
function statusOf(err) {
  return err?.statusCode
}

// api is the SDK's own REST client, for the template routes it has no
// method of its own for.
const api = () => new ApiClient(new ConnectionConfig()).api

let built // the template of the first test, which the second one lists and deletes

test('Template.build copies files, runs commands, keeps ENV and WORKDIR; a create starts from the built disk', async () => {
  const name = `${prefix}-files`
  const template = base()
    .copy('files', '/home/user/files')
    .runCmd('echo hello-from-build > /home/user/built.txt && ls /home/user/files')
    .setEnvs({ GREETING: 'hi' })
    .setWorkdir('/home/user/work')
    .runCmd('pwd > where.txt')
  const { info, logs } = await build(template, name)
  assert.ok(info.templateId, 'the build names its template id')
  assert.ok(info.buildId, 'the build names its build id')
  const text = logText(logs)
  // The ls of the RUN step, streamed from inside the build's sandbox.
  assert.match(text, /with space\.txt/, `the RUN step's output is not in the logs:\n${text}`)
  assert.match(text, /^nested$/m, `the RUN step's output is not in the logs:\n${text}`)
  built = { name, templateId: info.templateId, buildId: info.buildId }

  const sbx = await create(name)
  try {
    for (const [rel, content] of Object.entries(files)) {
      assert.equal(await sbx.files.read(`/home/user/files/${rel}`), content, `copied ${rel}`)
    }
    assert.equal(await sbx.files.read('/home/user/built.txt'), 'hello-from-build\n')
    assert.equal(await sbx.files.read('/home/user/work/where.txt'), '/home/user/work\n')
    const r = await sbx.commands.run('echo "greeting=$GREETING"')
    assert.equal(r.stdout.trim(), 'greeting=hi')
  } finally {
    await kill(sbx)
  }

  // A built template lives on the isolated lane only.
  await assert.rejects(create(name, { allowInternetAccess: true }), (err) => {
    assert.equal(statusOf(err), 400, `create with internet access: ${err}`)
    return true
  })
})

test('a built template is listed, described, exists, and is gone once deleted', async () => {
  assert.ok(built, 'the build test did not produce a template')
  const { name, templateId, buildId } = built

  const list = await api().GET('/templates')
  assert.equal(list.response.status, 200)
  const row = list.data.find((t) => t.templateID === templateId)
  assert.ok(row, `GET /templates does not list ${templateId}: ${JSON.stringify(list.data)}`)
  assert.ok([...(row.aliases ?? []), ...(row.names ?? [])].includes(name), `row names ${JSON.stringify(row)}`)
  assert.equal(row.buildStatus, 'ready')

  const got = await api().GET('/templates/{templateID}', { params: { path: { templateID: templateId } } })
  assert.equal(got.response.status, 200)
  assert.equal(got.data.templateID, templateId)
  assert.ok(got.data.builds.some((b) => b.buildID === buildId && b.status === 'ready'),
    `the template's builds do not include ${buildId} ready: ${JSON.stringify(got.data.builds)}`)

  assert.equal(await Template.exists(name), true)

  // A template is private to its key's namespace: public false is what it
  // is, public true is refused with the reason.
  const path = { params: { path: { templateID: templateId } } }
  const patched = await api().PATCH('/v2/templates/{templateID}', { ...path, body: { public: false } })
  assert.equal(patched.response.status, 200)
  assert.deepEqual(patched.data.names, [name])
  const published = await api().PATCH('/templates/{templateID}', { ...path, body: { public: true } })
  assert.equal(published.response.status, 400)
  assert.match(published.error.message, /private/)

  const del = await api().DELETE('/templates/{templateID}', { params: { path: { templateID: templateId } } })
  assert.equal(del.response.status, 204)
  assert.equal(await Template.exists(name), false)
  const after = await api().GET('/templates')
  const stale = after.data.find((t) => t.templateID === templateId)
  assert.ok(!stale, `the deleted template is still listed: ${JSON.stringify(stale)}`)
  const gone = await api().GET('/templates/{templateID}', { params: { path: { templateID: templateId } } })
  assert.equal(gone.response.status, 404, `GET of the deleted template: ${JSON.stringify(gone.data)}`)
  const again = await api().DELETE('/templates/{templateID}', { params: { path: { templateID: templateId } } })
  assert.equal(again.response.status, 404)

  await assert.rejects(create(name), (err) => {
    assert.equal(statusOf(err), 404, `create of a deleted template: ${err}`)
    return true
  })
})

test('tags: builds of name:tag, a tag assigned and moved atomically, removed; a create of name:tag gets that build', async () => {
  const name = `${prefix}-tagged`
  const v1 = await build(base().runCmd('echo one > /home/user/version.txt'), `${name}:v1`)
  assert.deepEqual(v1.info.tags, ['v1'])
  const v2 = await build(base().runCmd('echo two > /home/user/version.txt'), `${name}:v2`, { tags: ['latest'] })
  assert.deepEqual(v2.info.tags, ['v2', 'latest'])
  assert.equal(v1.info.templateId, v2.info.templateId, 'the tags of one name are one template')
  assert.notEqual(v1.info.buildId, v2.info.buildId)

  const versionOf = async (ref) => {
    const sbx = await create(ref)
    try {
      return (await sbx.files.read('/home/user/version.txt')).trim()
    } finally {
      await kill(sbx)
    }
  }
  assert.equal(await versionOf(`${name}:v1`), 'one')
  assert.equal(await versionOf(`${name}:latest`), 'two')
  await assert.rejects(create(name), (err) => {
    assert.equal(statusOf(err), 404, `a create of the untagged name, which has no default tag: ${err}`)
    return true
  })

  const assigned = await Template.assignTags(`${name}:v1`, 'production')
  assert.equal(assigned.buildId, v1.info.buildId)
  assert.deepEqual(assigned.tags, ['production'])
  assert.equal(await versionOf(`${name}:production`), 'one')
  const moved = await Template.assignTags(`${name}:v2`, ['production', 'stable'])
  assert.equal(moved.buildId, v2.info.buildId)
  assert.equal(await versionOf(`${name}:production`), 'two', 'the moved tag serves the new build')

  const byTag = Object.fromEntries((await Template.getTags(v1.info.templateId)).map((t) => [t.tag, t.buildId]))
  assert.deepEqual(byTag, {
    v1: v1.info.buildId, v2: v2.info.buildId, latest: v2.info.buildId, production: v2.info.buildId, stable: v2.info.buildId,
  })

  await Template.removeTags(name, ['production', 'stable'])
  const left = (await Template.getTags(v1.info.templateId)).map((t) => t.tag).sort()
  assert.deepEqual(left, ['latest', 'v1', 'v2'])
  await assert.rejects(create(`${name}:production`), (err) => {
    assert.equal(statusOf(err), 404, `a create of a removed tag: ${err}`)
    return true
  })
  await assert.rejects(Template.removeTags(name, 'never-assigned'), /never-assigned/)
  await assert.rejects(Template.assignTags(`${name}:missing`, 'x'), /not found/)
  await assert.rejects(Template.assignTags(`${name}:v1`, 'Not A Tag'), /invalid template tag/)

  const del = await api().DELETE('/templates/{templateID}', { params: { path: { templateID: v1.info.templateId } } })
  assert.equal(del.response.status, 204)
  await assert.rejects(Template.getTags(v1.info.templateId), /not found/)
})

test('a failing step fails the build with its output in the logs', async () => {
  const name = `${prefix}-fails`
  const template = base().runCmd('echo about-to-fail && exit 3')
  await assert.rejects(build(template, name), (err) => {
    assert.ok(err instanceof BuildError, `not a BuildError: ${err?.name}: ${err}`)
    // The reason names the exit code of the command that failed.
    assert.match(err.message, /exit/i, `the error does not say what failed: ${err.message}`)
    assert.match(err.message, /\b3\b/, `the error does not name the exit code: ${err.message}`)
    assert.match(logText(err.logs), /about-to-fail/, `the failing step's output is not in the logs:\n${logText(err.logs)}`)
    return true
  })
  assert.equal(await Template.exists(name), false, 'a failed first build published a template')
})

test('a build beyond the build slots is queued, says where it waits, and runs', async () => {
  assert.ok(parallel >= 1, 'E2E_BUILD_PARALLEL')
  // Fill every slot with a slow build (one key's namespace runs at most
  // all but one of them; the rest queue); each is started once its log
  // says the SDK waits for the build (after the trigger was accepted).
  const slow = []
  const started = []
  for (let i = 0; i < parallel; i++) {
    let markStarted
    started.push(new Promise((resolve) => (markStarted = resolve)))
    slow.push(
      Template.build(base().runCmd(`sleep 4 && echo slow-${i}`), `${prefix}-slow-${i}`, {
        onBuildLogs: (e) => {
          if (e.message === 'Waiting for logs...') markStarted()
        },
      }),
    )
  }
  // A build that fails early must not leave this test waiting forever.
  await Promise.race([Promise.all(started), Promise.all(slow)])

  // The next build is accepted, not refused: it waits in the queue, its
  // log says where, and it runs once a slot frees.
  const third = `${prefix}-queued`
  const logs = []
  const queued = Template.build(base().runCmd('echo queued > /home/user/queued.txt'), third, {
    onBuildLogs: (e) => logs.push(e.message),
  })
  await Promise.all([...slow, queued])
  assert.ok(logs.some((m) => /position \d+ in the build queue/.test(m)), `the queued build's log never gave its position:\n${logs.join('\n')}`)
  const sbx = await create(third)
  try {
    assert.equal(await sbx.files.read('/home/user/queued.txt'), 'queued\n')
  } finally {
    await kill(sbx)
  }
})

test('an upload over the store\'s limit fails the build', { skip: uploadLimit === undefined && 'the store sets no upload limit' }, async () => {
  // Random bytes: the SDK gzips the archive, and these do not shrink.
  const dir = mkdtempSync(path.join(tmpdir(), 'e2e-template-big-'))
  try {
    mkdirSync(path.join(dir, 'big'))
    writeFileSync(path.join(dir, 'big', 'blob.bin'), randomBytes(uploadLimit + 64 * 1024))
    const template = Template({ fileContextPath: dir }).fromTemplate('base').copy('big', '/home/user/big')
    await assert.rejects(build(template, `${prefix}-too-big`), (err) => {
      assert.ok(err instanceof FileUploadError, `not a FileUploadError: ${err?.name}: ${err}`)
      return true
    })
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  assert.equal(await Template.exists(`${prefix}-too-big`), false)
})

test('a snapshot keeps a sandbox\'s files, starts new sandboxes, and is deleted', async () => {
  const marker = `snapshot-${prefix}`
  const sbx = await create({ allowInternetAccess: false })
  let snapshotId
  try {
    await sbx.files.write('/home/user/snap.txt', marker)
    ;({ snapshotId } = await sbx.createSnapshot())
    assert.ok(snapshotId, 'createSnapshot returned no id')
  } finally {
    await kill(sbx)
  }
  const listed = await allPages(Sandbox.listSnapshots())
  assert.ok(listed.some((s) => s.snapshotId === snapshotId), `listSnapshots misses ${snapshotId}: ${JSON.stringify(listed)}`)

  const from = await create(snapshotId)
  try {
    assert.equal(await from.files.read('/home/user/snap.txt'), marker)
  } finally {
    await kill(from)
  }

  assert.equal(await Sandbox.deleteSnapshot(snapshotId), true)
  const after = await allPages(Sandbox.listSnapshots())
  assert.ok(!after.some((s) => s.snapshotId === snapshotId), 'the deleted snapshot is still listed')
  assert.equal(await Sandbox.deleteSnapshot(snapshotId), false, 'a second delete finds the snapshot')
  await assert.rejects(create(snapshotId), (err) => {
    assert.equal(statusOf(err), 404, `create from a deleted snapshot: ${err}`)
    return true
  })
})

test('a create naming a template that exists nowhere is 404', async () => {
  await assert.rejects(create(`${prefix}-nowhere`), (err) => {
    assert.equal(statusOf(err), 404, `create of an unknown template: ${err}`)
    return true
  })
})
