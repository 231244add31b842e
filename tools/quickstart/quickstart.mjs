// Quickstart: the unmodified e2b SDK against sandbox-operator.
//
// Start the local system first (it prints the E2B_* variables to export):
//   tools/bazel run //src/cmd/sandbox-e2b-local
// then, in this directory:
//   npm ci && node quickstart.mjs
//
// It creates a sandbox from the default template alias ("base"), runs a
// command, writes and reads back a file, and kills the sandbox. It exits
// non-zero if any step does not do what it says.
import { Sandbox } from 'e2b'

function check(ok, what) {
  if (!ok) throw new Error(`quickstart: ${what}`)
}

const sbx = await Sandbox.create()
console.log(`created sandbox ${sbx.sandboxId}`)
try {
  const run = await sbx.commands.run('echo "hello from the sandbox"')
  check(run.exitCode === 0, `command exited ${run.exitCode}`)
  console.log(`command said: ${run.stdout.trim()}`)
  check(run.stdout === 'hello from the sandbox\n', `unexpected command output ${JSON.stringify(run.stdout)}`)

  const path = '/home/user/quickstart.txt'
  await sbx.files.write(path, 'written by the quickstart')
  const content = await sbx.files.read(path)
  console.log(`file ${path} holds: ${content}`)
  check(content === 'written by the quickstart', `read back ${JSON.stringify(content)}`)
} finally {
  await sbx.kill()
  console.log(`killed sandbox ${sbx.sandboxId}`)
}
