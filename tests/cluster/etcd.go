package cluster

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdServer is a single-member etcd running inside the test process.
//
// Embedding it saves building and supervising another binary; the
// kube-apiserver, which is a separate process, reaches it over loopback
// like any etcd.
type etcdServer struct {
	e        *embed.Etcd
	url      string // client URL with the port the kernel chose
	peerAddr string // host:port of the peer listener, kept for a restart
	logFile  *os.File
	stopOnce sync.Once // Stop after StopEtcd must not close etcd twice
	stopped  bool      // set by stop
}

// startEtcd starts etcd with its data and log under dir. Both listeners take
// port 0, so the kernel picks free ports and there is no window in which
// another process could take a port chosen in advance.
func startEtcd(ctx context.Context, dir string) (*etcdServer, error) {
	return runEtcd(ctx, dir, "127.0.0.1:0", "127.0.0.1:0", os.O_TRUNC)
}

// runEtcd starts etcd with its data and log under dir, serving clients on
// clientAddr and peers on peerAddr (host:port; port 0 lets the kernel
// choose). logMode is os.O_TRUNC for a first start and os.O_APPEND for a
// restart (see restart.go), which keeps the log of the run before it.
func runEtcd(ctx context.Context, dir, clientAddr, peerAddr string, logMode int) (*etcdServer, error) {
	client := url.URL{Scheme: "http", Host: clientAddr}
	peer := url.URL{Scheme: "http", Host: peerAddr}
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// The data is thrown away with the test; fsync only slows a loaded
	// machine down.
	cfg.UnsafeNoFsync = true
	// Logs go to a file that is shown only when a test fails. The logger
	// is built here rather than from LogOutputs so that the file can be
	// closed with the server.
	logPath := filepath.Join(dir, "etcd.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|logMode, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open etcd log: %w", err)
	}
	encoding := zap.NewProductionEncoderConfig()
	encoding.EncodeTime = zapcore.ISO8601TimeEncoder
	encoder := zapcore.NewJSONEncoder(encoding)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(zapcore.NewCore(encoder, zapcore.AddSync(logFile), zap.WarnLevel)))

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	s := &etcdServer{e: e, logFile: logFile}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		s.stop()
		return nil, fmt.Errorf("etcd failed while starting: %w", err)
	case <-ctx.Done():
		s.stop()
		return nil, fmt.Errorf("etcd did not become ready: %w", context.Cause(ctx))
	}
	s.url = "http://" + e.Clients[0].Addr().String()
	s.peerAddr = e.Peers[0].Addr().String()
	return s, nil
}

// stop closes etcd's listeners, waits for its goroutines to end and closes
// its log. Calls after the first do nothing.
func (s *etcdServer) stop() {
	s.stopOnce.Do(func() {
		s.e.Close()
		s.logFile.Close()
		s.stopped = true
	})
}
