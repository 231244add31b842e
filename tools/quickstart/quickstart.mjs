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
// and kills the sandbox. It exits non-zero if any step does not do what it
// says.
import { Sandbox } from 'e2b'

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
