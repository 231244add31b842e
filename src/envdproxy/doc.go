// Package envdproxy is the e2b data plane: an HTTP handler that places each
// request on a sandbox, authorizes it with that sandbox's envd access token
// and carries it, bytes unchanged, over the owning node's guest-port relay
// (sandboxd GET /v1/sandboxes/{id}/ports/{port}).
//
// The package knows nothing of Kubernetes. Where sandboxes live comes from a
// Locator: sandbox-envd-proxy implements it over the NodeInventory informer
// (package inventorylocator), sandbox-e2b over its sandboxd mesh.
//
// A request names its sandbox by host ({port}-{sandboxID}.{domain}) or by
// the E2b-Sandbox-Id / E2b-Sandbox-Port headers. Its X-Access-Token must
// equal hex(HMAC-SHA256(secret, claim token)); the claim token is read from
// the owning node with the fleet token, kept in memory for a minute and
// never sent anywhere but that node's relay. Signed file URLs on envd's
// port are the one request that carries no token: they are relayed with
// the fleet token, which the node treats as passive (a paused sandbox stays
// paused), and envd checks the signature itself.
//
// Every failure to reach a sandbox — unknown, paused, nothing listening,
// node down — is the same 502, so no reply tells a caller which sandbox
// ids exist or which node holds one.
//
// What the proxy carries — each answer's status, each relay dial and why
// it failed, the bytes each way, the relays open — is told to the
// Config's Observer, in terms that name no sandbox; the metrics package
// turns it into Prometheus series.
package envdproxy
