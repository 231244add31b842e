package buildstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const (
	// maxPresignTTL is the longest a SigV4 presigned URL may be valid.
	maxPresignTTL = 7 * 24 * time.Hour
	// defaultRegion signs requests when neither the flags nor the AWS
	// configuration name a region: SigV4 needs one, and S3-compatible
	// stores mostly accept any.
	defaultRegion = "us-east-1"
)

// S3Config configures an S3 store.
type S3Config struct {
	// Bucket keeps the archives. Required.
	Bucket string
	// Prefix starts every key; archives live under <Prefix>/e2b-files/.
	Prefix string
	// Endpoint, when set, replaces AWS's endpoint (S3-compatible stores).
	Endpoint string
	// Region of the bucket; empty takes the AWS configuration's.
	Region string
	// ForcePathStyle addresses the bucket in the URL path rather than
	// the host name, as most S3-compatible stores need.
	ForcePathStyle bool
	// PresignTTL is how long an upload URL stays valid; at most 7 days.
	PresignTTL time.Duration
}

// NewS3 opens the store on cfg.Bucket with credentials from the default
// AWS chain (environment, shared files, web identity, instance role). It
// does not contact the bucket. The credentials need s3:GetObject,
// s3:PutObject and s3:DeleteObject on the prefix and s3:ListBucket on the
// bucket: without ListBucket, S3 answers a missing object 403 rather than
// 404, and UploadLink reports that as an error.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	return newS3(ctx, cfg)
}

// newS3 is NewS3 with extra AWS load options, which tests use to bring
// their own credentials and HTTP client.
func newS3(ctx context.Context, cfg S3Config, extra ...func(*config.LoadOptions) error) (*S3, error) {
	switch {
	case cfg.Bucket == "":
		return nil, errors.New("buildstore: no S3 bucket")
	case cfg.PresignTTL <= 0 || cfg.PresignTTL > maxPresignTTL:
		return nil, fmt.Errorf("buildstore: the upload URL lifetime must be positive and at most %s, got %s", maxPresignTTL, cfg.PresignTTL)
	}
	opts := append([]func(*config.LoadOptions) error(nil), extra...)
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("buildstore: loading the AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = defaultRegion
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.ForcePathStyle
		// Many S3-compatible stores send no checksum on a read; the SDK
		// would print a line to stderr for each, past the process's
		// logger.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	keyPrefix := filesDir + "/"
	if p := strings.Trim(cfg.Prefix, "/"); p != "" {
		keyPrefix = p + "/" + keyPrefix
	}
	return &S3{
		client:    client,
		presign:   s3.NewPresignClient(client, s3.WithPresignExpires(cfg.PresignTTL)),
		bucket:    cfg.Bucket,
		keyPrefix: keyPrefix,
	}, nil
}
