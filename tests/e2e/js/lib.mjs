// Shared helpers of the end-to-end suites. The Go harness that starts the
// servers passes everything through the environment: the e2b SDK's own
// variables (E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN, E2B_API_KEY) and the
// suite's (E2E_*).
import assert from 'node:assert/strict'
import http from 'node:http'
import { writeFileSync } from 'node:fs'

export function env(name) {
  const v = process.env[name]
  assert.ok(v, `${name} must be set by the harness`)
  return v
}

// rawApi calls the e2b REST surface without the SDK, to see exact status
// codes and bodies (and requests the SDK refuses to send, like one with no
// key).
export async function rawApi(method, path, { key, body } = {}) {
  const headers = { 'content-type': 'application/json' }
  if (key !== undefined) headers['x-api-key'] = key
  const res = await fetch(env('E2B_API_URL') + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  let json
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: res.status, text, json }
}

// fetchAsWildcardHost fetches url from the data plane the way a client that
// resolves *.{domain} to the proxy does: to the proxy's address, with the
// sandbox's derived host name in Host. Plain HTTP, no SDK, no headers of
// e2b's.
export function fetchAsWildcardHost(url, host) {
  const u = new URL(url)
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path: u.pathname + u.search, method: 'GET', headers: { host } },
      (res) => {
        const chunks = []
        res.on('data', (c) => chunks.push(c))
        res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }))
      },
    )
    req.on('error', reject)
    req.end()
  })
}

// allPages drains a paginator (Sandbox.list, listSnapshots).
export async function allPages(paginator) {
  const out = []
  while (paginator.hasNext) {
    out.push(...(await paginator.nextItems()))
  }
  return out
}

// report writes facts the Go harness checks afterwards (e.g. that a
// sandbox created here is visible through the Kubernetes API).
export function report(facts) {
  const path = process.env.E2E_REPORT
  if (path) writeFileSync(path, JSON.stringify(facts, null, 2))
}

export function near(actualMs, expectedMs, toleranceMs, what) {
  assert.ok(
    Math.abs(actualMs - expectedMs) <= toleranceMs,
    `${what}: ${new Date(actualMs).toISOString()} is not within ${toleranceMs} ms of ${new Date(expectedMs).toISOString()}`,
  )
}
