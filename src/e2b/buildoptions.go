package e2b

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
	"github.com/cocoonstack/sandbox-operator/src/e2b/buildstore"
)

// Defaults of the build flags.
const (
	DefaultBuildUploadMax = 1 << 30
	// A namespace's template uploads are bounded in number and bytes:
	// each build uploads one archive per COPY step, so a thousand files
	// and 10 GiB hold many templates' worth, and stop a client that
	// uploads without end.
	DefaultBuildUploadMaxFiles = 1000
	DefaultBuildUploadMaxTotal = 10 << 30
	// uploadURLTTL is how long an upload URL the surface hands out stays
	// valid: the SDK uploads right after asking.
	uploadURLTTL = time.Hour
	// s3SetupTimeout bounds loading the AWS configuration at start-up.
	s3SetupTimeout = 30 * time.Second
)

// BuildOptions are the --e2b-build* flags.
type BuildOptions struct {
	Enabled   bool
	Parallel  int
	Timeout   time.Duration
	LogLines  int
	Dir       string
	UploadMax int64
	// UploadMaxFiles and UploadMaxTotal bound a namespace's stored
	// archives; 0 lifts the bound.
	UploadMaxFiles int
	UploadMaxTotal int64

	S3Bucket         string
	S3Prefix         string
	S3Endpoint       string
	S3Region         string
	S3ForcePathStyle bool
}

// NewBuildOptions returns the flag defaults.
func NewBuildOptions() BuildOptions {
	return BuildOptions{
		Parallel: build.DefaultParallel, Timeout: build.DefaultTimeout, LogLines: build.DefaultLogLines,
		UploadMax: DefaultBuildUploadMax, UploadMaxFiles: DefaultBuildUploadMaxFiles, UploadMaxTotal: DefaultBuildUploadMaxTotal,
	}
}

// AddFlags registers the --e2b-build* flags.
func (o *BuildOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "e2b-builds", o.Enabled,
		"Serve the e2b template build API (Template.build). Builds run in the process that took the request and live in its memory, so every status poll must reach the same replica.")
	fs.IntVar(&o.Parallel, "e2b-build-parallel", o.Parallel,
		"Builds that run at once, shared between namespaces: one namespace runs at most its equal share of them, and never all of them when there are two or more. A build beyond waits in a queue and starts by itself.")
	fs.DurationVar(&o.Timeout, "e2b-build-timeout", o.Timeout,
		"Bound on one build, claim through publish; it is also the lease of the build's sandbox.")
	fs.IntVar(&o.LogLines, "e2b-build-log-lines", o.LogLines,
		"Log lines kept per build; later lines are dropped.")
	fs.StringVar(&o.Dir, "e2b-build-dir", o.Dir,
		"Directory that keeps the archives COPY steps upload, taken through this surface's own signed PUT. Every replica must see the same directory, or use --e2b-build-store-s3-bucket.")
	fs.Int64Var(&o.UploadMax, "e2b-build-upload-max", o.UploadMax,
		"Largest archive in bytes a signed PUT to --e2b-build-dir takes.")
	fs.IntVar(&o.UploadMaxFiles, "e2b-build-upload-max-files", o.UploadMaxFiles,
		"Most archives one namespace's templates may keep in the build store; an upload beyond answers 413. 0 lifts the bound.")
	fs.Int64Var(&o.UploadMaxTotal, "e2b-build-upload-max-total", o.UploadMaxTotal,
		"Most bytes of archives one namespace's templates may keep in the build store; an upload beyond answers 413. 0 lifts the bound.")
	fs.StringVar(&o.S3Bucket, "e2b-build-store-s3-bucket", o.S3Bucket,
		"S3 bucket that keeps the archives COPY steps upload, through presigned PUTs; credentials come from the default AWS chain.")
	fs.StringVar(&o.S3Prefix, "e2b-build-store-s3-prefix", o.S3Prefix,
		"Key prefix for the archives in --e2b-build-store-s3-bucket; they live under <prefix>/e2b-files/.")
	fs.StringVar(&o.S3Endpoint, "e2b-build-store-s3-endpoint", o.S3Endpoint,
		"Endpoint of an S3-compatible store instead of AWS.")
	fs.StringVar(&o.S3Region, "e2b-build-store-s3-region", o.S3Region,
		"Region of --e2b-build-store-s3-bucket.")
	fs.BoolVar(&o.S3ForcePathStyle, "e2b-build-store-s3-force-path-style", o.S3ForcePathStyle,
		"Address the bucket in the path, as most S3-compatible stores need.")
}

// Config validates the build flags and opens the store; nil when builds
// are off. envdSecret keys the directory store's upload signatures, so
// every replica (they all read the same secret) accepts every other's.
func (o BuildOptions) Config(envdSecret []byte) (*BuildConfig, error) {
	s3Set := o.S3Bucket != "" || o.S3Prefix != "" || o.S3Endpoint != "" || o.S3Region != "" || o.S3ForcePathStyle
	if !o.Enabled {
		if o.Dir != "" || s3Set {
			return nil, errors.New("--e2b-build-dir and --e2b-build-store-s3-* configure the template build API: set --e2b-builds too, or drop them")
		}
		return nil, nil
	}
	switch {
	case o.Parallel < 1:
		return nil, fmt.Errorf("--e2b-build-parallel must be at least 1, got %d", o.Parallel)
	case o.Timeout < time.Minute:
		return nil, fmt.Errorf("--e2b-build-timeout must be at least 1m, got %s", o.Timeout)
	case o.LogLines < 1:
		return nil, fmt.Errorf("--e2b-build-log-lines must be at least 1, got %d", o.LogLines)
	case o.UploadMax < 1:
		return nil, fmt.Errorf("--e2b-build-upload-max must be at least 1, got %d", o.UploadMax)
	case o.UploadMaxFiles < 0:
		return nil, fmt.Errorf("--e2b-build-upload-max-files must not be negative, got %d", o.UploadMaxFiles)
	case o.UploadMaxTotal < 0:
		return nil, fmt.Errorf("--e2b-build-upload-max-total must not be negative, got %d", o.UploadMaxTotal)
	case o.Dir != "" && o.S3Bucket != "":
		return nil, errors.New("--e2b-build-dir and --e2b-build-store-s3-bucket name two stores: keep one")
	case o.Dir == "" && o.S3Bucket == "":
		return nil, errors.New("--e2b-builds needs a store for the files COPY steps upload: set --e2b-build-dir or --e2b-build-store-s3-bucket")
	case o.Dir == "" && s3Set && o.S3Bucket == "":
		return nil, errors.New("--e2b-build-store-s3-* need --e2b-build-store-s3-bucket")
	}
	cfg := &BuildConfig{Parallel: o.Parallel, Timeout: o.Timeout, LogLines: o.LogLines,
		MaxUploadFiles: o.UploadMaxFiles, MaxUploadBytes: o.UploadMaxTotal}
	// A flag's 0 lifts its bound; BuildConfig's 0 takes the default.
	if cfg.MaxUploadFiles == 0 {
		cfg.MaxUploadFiles = -1
	}
	if cfg.MaxUploadBytes == 0 {
		cfg.MaxUploadBytes = -1
	}
	if o.Dir != "" {
		mac := hmac.New(sha256.New, envdSecret)
		mac.Write([]byte("e2b build uploads"))
		dir, err := buildstore.NewDir(o.Dir, mac.Sum(nil), o.UploadMax, uploadURLTTL, clock.RealClock{})
		if err != nil {
			return nil, fmt.Errorf("--e2b-build-dir: %w", err)
		}
		cfg.Store, cfg.Uploads = dir, dir.UploadHandler()
		return cfg, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s3SetupTimeout)
	defer cancel()
	s3, err := buildstore.NewS3(ctx, buildstore.S3Config{
		Bucket: o.S3Bucket, Prefix: o.S3Prefix, Endpoint: o.S3Endpoint, Region: o.S3Region,
		ForcePathStyle: o.S3ForcePathStyle, PresignTTL: uploadURLTTL,
	})
	if err != nil {
		return nil, fmt.Errorf("--e2b-build-store-s3-bucket: %w", err)
	}
	cfg.Store = s3
	return cfg, nil
}
