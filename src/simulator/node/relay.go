package node

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// relay is one upgraded guest-port connection.
type relay struct {
	sb     *claimed
	client net.Conn
	guest  net.Conn
	once   sync.Once
}

func (r *relay) close() {
	r.once.Do(func() {
		_ = r.client.Close()
		_ = r.guest.Close()
	})
}

// closeRelaysLocked cuts every relay into sb (release, hibernate, reap).
func (n *Node) closeRelaysLocked(sb *claimed) {
	for r := range n.relays {
		if r.sb == sb {
			r.close()
		}
	}
}

// servePort is GET /v1/sandboxes/{id}/ports/{port}: after 101 the
// connection is a raw byte relay to the guest's 127.0.0.1:{port}.
//
// The sandbox's own token is the active path: a hibernated or archived
// sandbox wakes (an archived one with a fresh lease). The root token is
// passive: it reaches a running guest but answers 409 "sandbox is paused"
// rather than consuming a hibernate snapshot or an archive.
func (n *Node) servePort(w http.ResponseWriter, r *http.Request) {
	n.stats.relayRequests.Add(1)
	id := r.PathValue("id")
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		writeError(w, errorf(http.StatusBadRequest, "port must be 1-65535"))
		return
	}
	bearer := bearerToken(r)
	if bearer == "" {
		writeError(w, errUnauthorized)
		return
	}
	if !strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), "tcp") {
		w.Header().Set("Upgrade", "tcp")
		writeError(w, errorf(http.StatusUpgradeRequired, "Upgrade: tcp required"))
		return
	}

	n.mu.Lock()
	sb := n.sandboxes[id]
	if sb == nil {
		n.mu.Unlock()
		writeError(w, errNotFound)
		return
	}
	active := tokenEqual(bearer, sb.token)
	if !active && !n.creds.isRoot(bearer) {
		n.mu.Unlock()
		writeError(w, errNotFound)
		return
	}
	if aerr := refuseFailed(sb, "relay"); aerr != nil {
		n.mu.Unlock()
		writeError(w, aerr)
		return
	}
	if sb.hibernated {
		if !active {
			n.mu.Unlock()
			writeError(w, errPaused)
			return
		}
		n.resumeLocked(sb)
	}
	info := SandboxInfo{ID: sb.id, Token: sb.token, Key: sb.key, ClaimRef: sb.claimRef, Tenant: sb.tenant}
	guests := sb.guests
	sb.openRelays++
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		sb.openRelays--
		sb.lastActive = n.cfg.Clock.Now()
		n.mu.Unlock()
	}()

	guest, err := guests.dial(r.Context(), port, info)
	if err != nil {
		n.log.Debug("relay: guest port not reachable", "node", n.cfg.Name, "sandbox", id, "port", port, "err", err)
		writeError(w, errGuestNoListen)
		return
	}

	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = guest.Close()
		writeError(w, errorf(http.StatusInternalServerError, "relay unavailable"))
		return
	}
	_ = client.SetDeadline(time.Time{})
	_, err = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
	if err == nil {
		err = brw.Flush()
	}
	if err != nil { // the client left before the relay began
		_ = client.Close()
		_ = guest.Close()
		return
	}
	// Bytes the client sent right behind its request are already in the
	// server's buffer; they go to the guest first.
	var fromClient io.Reader = client
	if k := brw.Reader.Buffered(); k > 0 {
		early, _ := brw.Reader.Peek(k)
		fromClient = io.MultiReader(bytes.NewReader(bytes.Clone(early)), client)
	}

	rl := &relay{sb: sb, client: client, guest: guest}
	n.mu.Lock()
	if n.sandboxes[id] != sb || sb.hibernated || sb.failed != "" || n.stopping() {
		n.mu.Unlock()
		rl.close()
		return
	}
	n.relays[rl] = struct{}{}
	n.mu.Unlock()
	n.stats.relays.Add(1)

	rl.pipe(fromClient)

	n.mu.Lock()
	delete(n.relays, rl)
	n.mu.Unlock()
}

// pipe copies both directions until each reaches its own EOF. An EOF is
// passed on as a write shutdown, so either side can stop sending and keep
// reading; a copy error ends the whole relay.
func (r *relay) pipe(fromClient io.Reader) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if _, err := io.Copy(r.guest, fromClient); err != nil {
			r.close()
			return
		}
		closeWrite(r.guest)
	}()
	go func() {
		defer wg.Done()
		if _, err := io.Copy(r.client, r.guest); err != nil {
			r.close()
			return
		}
		closeWrite(r.client)
	}()
	wg.Wait()
	r.close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
