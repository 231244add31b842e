// The unmodified npm @e2b/code-interpreter against the README's main job
// (sandbox-e2b-local): its default template, code-interpreter-v1, is a pool
// of the simulator's e2b-ci guest, a real IPython kernel in an isolated
// machine. The Go harness (tests/e2e/codeinterp) starts the server.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import { Sandbox } from '@e2b/code-interpreter'
import { env } from './lib.mjs'

// Every sandbox made here is killed when the suite ends.
const live = new Set()
async function create(opts) {
  const sbx = await Sandbox.create(opts)
  live.add(sbx)
  return sbx
}
test.after(async () => {
  for (const sbx of live) await sbx.kill().catch(() => {})
})

test('cells share a context\'s state; the last expression is the main result', async () => {
  const sbx = await create()
  await sbx.runCode('x = 41')
  const r = await sbx.runCode('x + 1')
  assert.equal(r.error, undefined)
  assert.equal(r.text, '42')
  assert.ok(r.results.some((res) => res.isMainResult && res.text === '42'))
  assert.ok(r.executionCount > 1, `execution count ${r.executionCount}`)
})

test('print streams each line while the cell runs', async () => {
  const sbx = await create({ allowInternetAccess: false })
  const seen = []
  const began = Date.now()
  const r = await sbx.runCode('import time\nprint("first", flush=True)\ntime.sleep(2)\nprint("second", flush=True)', {
    onStdout: (m) => seen.push({ line: m.line, at: Date.now() - began }),
  })
  assert.deepEqual(r.logs.stdout.map((l) => l.trim()), ['first', 'second'])
  assert.deepEqual(seen.map((s) => s.line.trim()), ['first', 'second'])
  // The first line arrived before the cell's two-second sleep was over.
  assert.ok(seen[1].at - seen[0].at >= 1500, `lines arrived ${seen[0].at} and ${seen[1].at} ms in: not streamed`)
})

test('a DataFrame has an HTML result and a figure a PNG result', async () => {
  const sbx = await create()
  const df = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": [3, 4]})')
  assert.match(df.results[0]?.html ?? '', /<table/)
  const fig = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()')
  const png = fig.results.find((res) => res.png)
  assert.ok(png, `no PNG result: ${JSON.stringify(fig.results.map((res) => Object.keys(res.raw)))}`)
  assert.equal(Buffer.from(png.png, 'base64').subarray(1, 4).toString(), 'PNG')
})

test('an exception is the error with its traceback, and the context goes on', async () => {
  const sbx = await create()
  const r = await sbx.runCode('def f():\n    return 1 / 0\nf()')
  assert.equal(r.error?.name, 'ZeroDivisionError')
  // IPython colours the traceback (ANSI escapes), as e2b's does.
  const traceback = (r.error?.traceback ?? '').replace(/\x1b\[[0-9;]*m/g, '')
  assert.match(traceback, /return 1 \/ 0/)
  assert.match(traceback, /ZeroDivisionError: division by zero/)
  // A string result is its text without repr's quotes, as e2b's server
  // reports it.
  assert.equal((await sbx.runCode('"still here"')).text, 'still here')
})

test('a cell past its timeout is interrupted and the context stays usable', async () => {
  const sbx = await create()
  await sbx.runCode('y = 1')
  await assert.rejects(sbx.runCode('import time\ny = 2\ntime.sleep(600)', { timeoutMs: 3_000 }), /timed out|timeout/i)
  // The next cell runs at once in the same context: the kernel was
  // interrupted, not left sleeping.
  const r = await sbx.runCode('y * 10', { timeoutMs: 30_000 })
  assert.equal(r.error, undefined, `the context is broken: ${r.error?.name} ${r.error?.value}`)
  assert.equal(r.text, '20')
})

test('contexts keep their own state; restart clears it; a removed context is gone', async () => {
  const sbx = await create()
  const a = await sbx.createCodeContext()
  const b = await sbx.createCodeContext({ cwd: '/tmp' })
  await sbx.runCode('secret = "in a"', { context: a })
  assert.equal((await sbx.runCode('secret', { context: a })).text, 'in a')
  assert.equal((await sbx.runCode('secret', { context: b })).error?.name, 'NameError')
  assert.equal((await sbx.runCode('import os; os.getcwd()', { context: b })).text, '/tmp')
  const ids = (await sbx.listCodeContexts()).map((c) => c.id)
  assert.ok(ids.includes(a.id) && ids.includes(b.id), `contexts ${ids}`)
  await sbx.restartCodeContext(a)
  assert.equal((await sbx.runCode('secret', { context: a })).error?.name, 'NameError')
  await sbx.removeCodeContext(b)
  assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === b.id))
  await assert.rejects(sbx.runCode('1', { context: b }))
})

test('env vars of a cell reach that cell only', async () => {
  const sbx = await create()
  const r = await sbx.runCode('import os; os.environ.get("CELL_ONLY")', { envs: { CELL_ONLY: 'yes' } })
  assert.equal(r.text, 'yes')
  assert.equal((await sbx.runCode('import os; os.environ.get("CELL_ONLY")')).text, undefined)
})

test('stderr streams as well; a language with no kernel is refused', async () => {
  const sbx = await create()
  const errs = []
  const r = await sbx.runCode('import sys\nprint("to stderr", file=sys.stderr, flush=True)', { onStderr: (m) => errs.push(m.line) })
  assert.deepEqual(r.logs.stderr.map((l) => l.trim()), ['to stderr'])
  assert.deepEqual(errs.map((l) => l.trim()), ['to stderr'])
  // The SDK shows only the status of this refusal (the server's message
  // says the guest has only a Python kernel).
  await assert.rejects(sbx.runCode('console.log(1)', { language: 'js' }), /400/)
})

test('a sandbox killed mid-cell ends the cell with an error', async () => {
  const sbx = await create()
  const running = sbx.runCode('import time\nprint("started", flush=True)\ntime.sleep(600)', {
    timeoutMs: 120_000,
    onStdout: async () => { await sbx.kill() },
  })
  await assert.rejects(running)
  assert.equal(await sbx.isRunning(), false)
  live.delete(sbx)
})

test('the host form reaches the code interpreter too, with either token', async () => {
  const sbx = await create()
  // What a client that resolves *.{domain} to the data plane sends: the
  // sandbox's host for port 49999, no e2b headers.
  const get = (headers) => new Promise((resolve, reject) => {
    const u = new URL(env('E2B_SANDBOX_URL'))
    const req = http.request({
      host: u.hostname, port: u.port, path: '/contexts', method: 'GET',
      headers: { host: sbx.getHost(49999), ...headers },
    }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }))
    })
    req.on('error', reject)
    req.end()
  })
  const byAccess = await get({ 'X-Access-Token': sbx.envdAccessToken })
  assert.equal(byAccess.status, 200, byAccess.body)
  assert.ok(JSON.parse(byAccess.body).some((c) => c.language === 'python'), byAccess.body)
  assert.equal((await get({ 'E2B-Traffic-Access-Token': sbx.trafficAccessToken })).status, 200)
  assert.equal((await get({})).status, 401)
})
