package buildstore

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

const (
	testBucket    = "e2b-archives"
	testAccessKey = "AKIDBUILDSTORETEST"
	testSecretKey = "buildstore-test-secret-not-a-real-one"
	testRegion    = "eu-test-1"
	testPresign   = 10 * time.Minute
)

// s3Env is an in-process S3 server on loopback: gofakes3 (in-memory)
// behind sigV4Verifier, which adds the authentication gofakes3 lacks.
type s3Env struct {
	srv      *httptest.Server
	backend  *s3mem.Backend
	verifier *sigV4Verifier
	// client dials the test server whatever host a URL names. That is
	// how virtual-host style reaches it: <bucket>.localhost is not
	// resolved through DNS but connected to the server directly, while
	// the Host header (which S3 routes and signs on) stays as the URL
	// says. Every connection stays on loopback.
	client *http.Client
	port   string
}

func newS3Env(t *testing.T) *s3Env {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	backend := s3mem.New()
	if err := backend.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	// Hosts under localhost:<port> name their bucket in the first label
	// (virtual-host style); any other host is path style.
	faker := gofakes3.New(backend, gofakes3.WithHostBucketBase("localhost:"+port))
	v := &sigV4Verifier{next: faker.Server(), accessKey: testAccessKey, secretKey: testSecretKey, region: testRegion}
	srv.Config.Handler = v
	srv.Start()
	t.Cleanup(srv.Close)

	addr := srv.Listener.Addr().String()
	var dialer net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dialer.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)

	// The store takes its credentials from the default AWS chain; the
	// environment is the first link of it. Shared files and any ambient
	// AWS settings are kept out so the test sees only what it sets.
	dir := t.TempDir()
	for k, val := range map[string]string{
		"AWS_ACCESS_KEY_ID":                      testAccessKey,
		"AWS_SECRET_ACCESS_KEY":                  testSecretKey,
		"AWS_SESSION_TOKEN":                      "",
		"AWS_PROFILE":                            "",
		"AWS_DEFAULT_PROFILE":                    "",
		"AWS_REGION":                             "",
		"AWS_DEFAULT_REGION":                     "",
		"AWS_ENDPOINT_URL":                       "",
		"AWS_ENDPOINT_URL_S3":                    "",
		"AWS_CONFIG_FILE":                        dir + "/config",
		"AWS_SHARED_CREDENTIALS_FILE":            dir + "/credentials",
		"AWS_CA_BUNDLE":                          "",
		"AWS_EC2_METADATA_DISABLED":              "true",
		"AWS_REQUEST_CHECKSUM_CALCULATION":       "",
		"AWS_RESPONSE_CHECKSUM_VALIDATION":       "",
		"AWS_WEB_IDENTITY_TOKEN_FILE":            "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI":     "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
	} {
		t.Setenv(k, val)
	}
	return &s3Env{srv: srv, backend: backend, verifier: v, client: &http.Client{Transport: tr}, port: port}
}

// pathStyle and virtualHost are the two ways to address the bucket.
func (e *s3Env) pathStyle() S3Config {
	return S3Config{Bucket: testBucket, Endpoint: "http://127.0.0.1:" + e.port, Region: testRegion, ForcePathStyle: true, PresignTTL: testPresign}
}

func (e *s3Env) virtualHost() S3Config {
	return S3Config{Bucket: testBucket, Endpoint: "http://localhost:" + e.port, Region: testRegion, PresignTTL: testPresign}
}

// store opens an S3 store whose HTTP client is e.client; everything else
// goes through NewS3's own path.
func (e *s3Env) store(t *testing.T, cfg S3Config) *S3 {
	t.Helper()
	s, err := newS3(context.Background(), cfg, config.WithHTTPClient(e.client))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stored reports whether the bucket holds key, asked of the backend
// directly so no signature or clock is involved.
func (e *s3Env) stored(key string) bool {
	_, err := e.backend.HeadObject(testBucket, key)
	return err == nil
}

// expire moves the server's clock past a URL presigned now.
func (e *s3Env) expire(ttl time.Duration) func() {
	e.verifier.skew.Store(int64(ttl + time.Second))
	return func() { e.verifier.skew.Store(0) }
}

func secondsOf(d time.Duration) string {
	return strconv.Itoa(int(d / time.Second))
}
