// Quickstart: the unmodified e2b SDK against sandbox-operator.
//
// Start the local system first (it prints the E2B_* variables to export):
//   tools/bazel run //src/cmd/sandbox-e2b-local
// then, in this directory:
//   npm ci && node quickstart.mjs
//
// It creates a sandbox from the default template alias ("base"), runs a
// command, shows who and where the command runs (its own machine: /home/user,
// user, the sandbox's hostname), writes and reads back a file, starts a web
// server in the sandbox and fetches a page from it through the data plane,
// and kills the sandbox. It creates a sandbox that pauses at its timeout
// and is woken by the next request. Then it builds a template of its own with
// Template.build (from "base", copying a local file in and running a
// command), starts a sandbox from it, reads what the build left there, and
// deletes the template. It ends with the code interpreter
// (@e2b/code-interpreter): a Python cell that prints a value and returns a
// chart. It exits non-zero if any step does not do what it says.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ApiClient, ConnectionConfig, Sandbox, Template } from 'e2b'
import { Sandbox as CodeInterpreter } from '@e2b/code-interpreter'

function check(ok, what) {
  if (!ok) throw new Error(`quickstart: ${what}`)
}

// fetchPort fetches path from the sandbox's port through the data plane: the
// E2B_SANDBOX_URL with the sandbox and port headers when it is set, the
// sandbox's own host otherwise. The envd access token authorizes it. It
// retries while nothing listens there yet (502).
async function fetchPort(sbx, port, path) {
  const base = process.env.E2B_SANDBOX_URL
  const url = base ? base + path : `https://${sbx.getHost(port)}${path}`
  const headers = { 'X-Access-Token': sbx.envdAccessToken }
  if (base) Object.assign(headers, { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': String(port) })
  for (let i = 0; ; i++) {
    const res = await fetch(url, { headers })
    if (res.ok) return res.text()
    check(res.status === 502 && i < 100, `port ${port} answered ${res.status}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

const sbx = await Sandbox.create()
console.log(`created sandbox ${sbx.sandboxId}`)
try {
  const run = await sbx.commands.run('echo "hello from the sandbox"')
  check(run.exitCode === 0, `command exited ${run.exitCode}`)
  console.log(`command said: ${run.stdout.trim()}`)
  check(run.stdout === 'hello from the sandbox\n', `unexpected command output ${JSON.stringify(run.stdout)}`)

  const who = await sbx.commands.run('pwd; id -un; hostname')
  const [cwd, user, hostname] = who.stdout.trim().split('\n')
  console.log(`inside the sandbox: cwd ${cwd}, user ${user}, hostname ${hostname}`)
  check(cwd === '/home/user' && user === 'user', `the command ran in ${cwd} as ${user}`)

  const path = '/home/user/quickstart.txt'
  await sbx.files.write(path, 'written by the quickstart')
  const content = await sbx.files.read(path)
  console.log(`file ${path} holds: ${content}`)
  check(content === 'written by the quickstart', `read back ${JSON.stringify(content)}`)

  // A web server in the sandbox, reached through the data plane.
  await sbx.files.write('/home/user/site/index.html', 'hello from a web server in the sandbox\n')
  await sbx.commands.run('python3 -m http.server 8000 --directory /home/user/site', { background: true })
  const page = await fetchPort(sbx, 8000, '/index.html')
  console.log(`port 8000 served: ${page.trim()}`)
  check(page === 'hello from a web server in the sandbox\n', `port 8000 served ${JSON.stringify(page)}`)
} finally {
  await sbx.kill()
  console.log(`killed sandbox ${sbx.sandboxId}`)
}

// A sandbox paused at its timeout and woken by a request: with lifecycle
// onTimeout 'pause' and autoResume (the isolated lane, allowInternetAccess
// false, is the one that pauses), the timeout pauses it with its files, and
// the next request through the data plane wakes it.
const napper = await Sandbox.create({
  allowInternetAccess: false,
  timeoutMs: 8_000,
  lifecycle: { onTimeout: 'pause', autoResume: true },
})
try {
  await napper.files.write('/home/user/nap.txt', 'kept while paused')
  const until = Date.now() + 60_000
  while ((await napper.getInfo()).state !== 'paused') {
    check(Date.now() < until, 'the sandbox was not paused at its timeout')
    await new Promise((r) => setTimeout(r, 250))
  }
  console.log(`sandbox ${napper.sandboxId} paused at its timeout`)
  const kept = await napper.files.read('/home/user/nap.txt')
  const state = (await napper.getInfo()).state
  console.log(`a request woke it: the file holds "${kept}", the sandbox is ${state}`)
  check(kept === 'kept while paused' && state === 'running', `after the request: ${JSON.stringify(kept)}, ${state}`)
} finally {
  await napper.kill()
}

// A template of your own: built from "base" with a local file copied in
// and a command run over it; a sandbox started from it has both.
const context = mkdtempSync(join(tmpdir(), 'quickstart-'))
try {
  writeFileSync(join(context, 'greeting.txt'), 'hello from a template\n')
  const template = Template({ fileContextPath: context })
    .fromTemplate('base')
    .copy('greeting.txt', '/home/user/greeting.txt')
    .runCmd('tr a-z A-Z < /home/user/greeting.txt > /home/user/shout.txt')
  const logs = []
  let built
  try {
    built = await Template.build(template, 'quickstart', { onBuildLogs: (entry) => logs.push(entry.message) })
  } catch (err) {
    // A server that does not serve builds (sandbox-apiserver without
    // --e2b-builds) says so with a 501; everything above still ran.
    if (!String(err.message).startsWith('501')) throw err
    console.log(`template builds are not served here: ${err.message}`)
  }
  if (built) await useTemplate(built, logs)
} finally {
  rmSync(context, { recursive: true, force: true })
}

// useTemplate starts a sandbox from the built template, reads what the
// build left there, and deletes the template.
async function useTemplate(built, logs) {
  console.log(`built template quickstart (${built.templateId}) in ${logs.length} log lines`)

  const fromTemplate = await Sandbox.create('quickstart')
  try {
    const greeting = await fromTemplate.files.read('/home/user/greeting.txt')
    const shout = await fromTemplate.files.read('/home/user/shout.txt')
    console.log(`sandbox from the template holds: ${greeting.trim()} / ${shout.trim()}`)
    check(greeting === 'hello from a template\n' && shout === 'HELLO FROM A TEMPLATE\n', `the template's files hold ${JSON.stringify([greeting, shout])}`)
  } finally {
    await fromTemplate.kill()
  }

  const api = new ApiClient(new ConnectionConfig())
  const res = await api.api.DELETE('/templates/{templateID}', { params: { path: { templateID: built.templateId } } })
  check(res.response.status === 204, `deleting the template answered ${res.response.status}`)
  console.log('deleted template quickstart')
}

// The code interpreter: @e2b/code-interpreter's Sandbox.create() takes a
// warm sandbox of its default template, code-interpreter-v1, whose IPython
// kernel is already running; runCode runs a Python cell there.
let interpreter
try {
  interpreter = await CodeInterpreter.create()
} catch (err) {
  // A server whose nodes serve no code-interpreter pool answers its alias
  // 404; everything above still ran.
  if (!/not found/i.test(String(err.message))) throw err
  console.log(`the code interpreter is not served here: ${err.message}`)
  process.exit(0)
}
try {
  const cell = await interpreter.runCode([
    'import matplotlib.pyplot as plt',
    'print("six times seven is", 6 * 7)',
    'plt.plot([1, 2, 3, 4], [1, 4, 9, 16])',
    'plt.title("squares")',
    'plt.show()',
  ].join('\n'))
  const printed = cell.logs.stdout.join('').trim()
  const chart = cell.results.find((r) => r.png)
  console.log(`the code interpreter printed: ${printed}`)
  check(printed === 'six times seven is 42', `the cell printed ${JSON.stringify(printed)}`)
  check(chart && Buffer.from(chart.png, 'base64').subarray(1, 4).toString() === 'PNG', 'the cell returned no PNG chart')
  console.log(`and returned a chart: a ${Buffer.from(chart.png, 'base64').length}-byte PNG`)
} finally {
  await interpreter.kill()
}
