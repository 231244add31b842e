package templates_test

import (
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/cocoonstack/sandbox-operator/tests/e2e/harness"
)

const (
	s3Bucket = "e2b-templates"
	s3Region = "us-east-1"
	s3Prefix = "e2e"
)

// fakeS3 is an in-memory S3-compatible store (gofakes3) served by the test
// process on loopback, with one bucket. It checks no signature; it counts
// the requests made to the build archives, so a run shows the SDK
// uploaded there and the server read back from there.
type fakeS3 struct {
	endpoint             string // http://127.0.0.1:<port>
	accessKey, secretKey string
	backend              *s3mem.Backend

	mu     sync.Mutex
	counts map[string]int // archive requests by method
}

// startS3 serves the store until the test ends.
func startS3(t *testing.T) *fakeS3 {
	t.Helper()
	s := &fakeS3{
		backend:   s3mem.New(),
		accessKey: "AKID" + harness.RandomHex(t)[:16], secretKey: harness.RandomHex(t),
		counts: map[string]int{},
	}
	if err := s.backend.CreateBucket(s3Bucket); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.endpoint = "http://" + l.Addr().String()
	faker := gofakes3.New(s.backend).Server()
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/"+s3Bucket+"/"+s3Prefix+"/e2b-files/") {
			s.mu.Lock()
			s.counts[r.Method]++
			s.mu.Unlock()
		}
		faker.ServeHTTP(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return s
}

// storeFlags are the --e2b-build-store-s3-* flags naming the bucket and
// prefix, addressed path style at the endpoint.
func (s *fakeS3) storeFlags() []string {
	return []string{
		"--e2b-build-store-s3-bucket=" + s3Bucket,
		"--e2b-build-store-s3-prefix=" + s3Prefix,
		"--e2b-build-store-s3-endpoint=" + s.endpoint,
		"--e2b-build-store-s3-region=" + s3Region,
		"--e2b-build-store-s3-force-path-style",
	}
}

// env is the environment a server using the store runs with: the
// credentials and region, and every other setting of the default AWS
// chain that could leak in from the machine set empty or pointed at
// missing files under dir.
func (s *fakeS3) env(dir string) []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.accessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.secretKey,
		"AWS_REGION=" + s3Region,
		"AWS_DEFAULT_REGION=" + s3Region,
		"AWS_SESSION_TOKEN=",
		"AWS_PROFILE=",
		"AWS_DEFAULT_PROFILE=",
		"AWS_ENDPOINT_URL=",
		"AWS_ENDPOINT_URL_S3=",
		"AWS_CA_BUNDLE=",
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "aws-config-absent"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "aws-credentials-absent"),
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_WEB_IDENTITY_TOKEN_FILE=",
		"AWS_ROLE_ARN=",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI=",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=",
		"AWS_REQUEST_CHECKSUM_CALCULATION=",
		"AWS_RESPONSE_CHECKSUM_VALIDATION=",
	}
}

// check asserts the SDK PUT an archive under the prefix, a build read it
// back, and deleting the template removed it.
func (s *fakeS3) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	puts, gets := s.counts[http.MethodPut], s.counts[http.MethodGet]
	s.mu.Unlock()
	if puts == 0 || gets == 0 {
		t.Errorf("the S3 store saw %d archive PUTs and %d GETs under %s/e2b-files/; want at least one of each", puts, gets, s3Prefix)
	}
	list, err := s.backend.ListBucket(s3Bucket, nil, gofakes3.ListBucketPage{})
	if err != nil {
		t.Error(err)
		return
	}
	for _, o := range list.Contents {
		t.Errorf("the bucket still holds %s after the suite deleted its templates", o.Key)
	}
}
