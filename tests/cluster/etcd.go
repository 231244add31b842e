package cluster

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

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
	e       *embed.Etcd
	url     string // client URL with the port the kernel chose
	logFile *os.File
}

// startEtcd starts etcd with its data and log under dir. Both listeners take
// port 0, so the kernel picks free ports and there is no window in which
// another process could take a port chosen in advance.
func startEtcd(ctx context.Context, dir string) (*etcdServer, error) {
	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.ListenClientUrls = []url.URL{loopback}
	cfg.AdvertiseClientUrls = []url.URL{loopback}
	cfg.ListenPeerUrls = []url.URL{loopback}
	cfg.AdvertisePeerUrls = []url.URL{loopback}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// The data is thrown away with the test; fsync only slows a loaded
	// machine down.
	cfg.UnsafeNoFsync = true
	// Logs go to a file that is shown only when a test fails. The logger
	// is built here rather than from LogOutputs so that the file can be
	// closed with the server.
	logPath := filepath.Join(dir, "etcd.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
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
	return s, nil
}

// stop closes etcd's listeners, waits for its goroutines to end and closes
// its log.
func (s *etcdServer) stop() {
	s.e.Close()
	s.logFile.Close()
}
