package buildstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3 is a Store on an S3 (or S3-compatible) bucket. The SDK uploads
// straight to the bucket through presigned PUT URLs.
type S3 struct {
	client    *s3.Client
	presign   *s3.PresignClient
	bucket    string
	keyPrefix string // "<prefix>/e2b-files/" or "e2b-files/"
}

var _ Store = (*S3)(nil)

// templatePrefix is the key prefix of a validated template's archives;
// the trailing slash keeps template "ab" from matching "abc".
func (s *S3) templatePrefix(templateID string) string {
	return s.keyPrefix + templateID + "/"
}

func (s *S3) objectKey(templateID, hash string) string {
	return s.templatePrefix(templateID) + hash
}

// UploadLink reports a stored archive as present, and otherwise presigns
// a PUT of it valid for the configured lifetime. base is not used: the
// SDK uploads to the bucket, not through the surface.
func (s *S3) UploadLink(ctx context.Context, _, templateID, hash string) (Link, error) {
	if err := checkIDs(templateID, hash); err != nil {
		return Link{}, err
	}
	key := s.objectKey(templateID, hash)
	_, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	switch {
	case err == nil:
		return Link{Present: true}, nil
	case !isNotFound(err):
		return Link{}, fmt.Errorf("buildstore: checking s3 object %s: %w", key, err)
	}
	req, err := s.presign.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return Link{}, fmt.Errorf("buildstore: presigning the upload of %s: %w", key, err)
	}
	return Link{URL: req.URL, Headers: extraSignedHeaders(req.SignedHeader)}, nil
}

// extraSignedHeaders are the headers the presigned signature covers that
// the SDK must send itself; Host it sends anyway.
func extraSignedHeaders(h http.Header) map[string]string {
	var out map[string]string
	for name, values := range h {
		if http.CanonicalHeaderKey(name) == "Host" || len(values) == 0 {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[name] = values[0]
	}
	return out
}

// Open reads an archive back from the bucket.
func (s *S3) Open(ctx context.Context, templateID, hash string) (io.ReadCloser, error) {
	if err := checkIDs(templateID, hash); err != nil {
		return nil, err
	}
	key := s.objectKey(templateID, hash)
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if isNotFound(err) {
		return nil, fmt.Errorf("%w: s3 object %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("buildstore: reading s3 object %s: %w", key, err)
	}
	return out.Body, nil
}

// DeleteTemplate lists the template's archives and deletes each. It
// deletes object by object, which every S3-compatible store takes (the
// batch call's checksum rules vary); a template holds a handful of
// archives. It goes on past a failed delete and reports them all.
func (s *S3) DeleteTemplate(ctx context.Context, templateID string) error {
	if err := checkTemplateID(templateID); err != nil {
		return err
	}
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket), Prefix: aws.String(s.templatePrefix(templateID)),
	})
	var errs []error
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("buildstore: listing the archives of %s: %w", templateID, err))
			break
		}
		for _, obj := range page.Contents {
			_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: obj.Key})
			if err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("buildstore: deleting s3 object %s: %w", aws.ToString(obj.Key), err))
			}
		}
	}
	return errors.Join(errs...)
}

// Usage lists the template's archives and adds up their sizes.
func (s *S3) Usage(ctx context.Context, templateID string) (Usage, error) {
	if err := checkTemplateID(templateID); err != nil {
		return Usage{}, err
	}
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket), Prefix: aws.String(s.templatePrefix(templateID)),
	})
	var u Usage
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return Usage{}, fmt.Errorf("buildstore: listing the archives of %s: %w", templateID, err)
		}
		for _, obj := range page.Contents {
			u.Files++
			u.Bytes += aws.ToInt64(obj.Size)
		}
	}
	return u, nil
}

// isNotFound tells a missing object from every other failure. A missing
// bucket is a misconfiguration, not a missing archive, so it stays an
// error where S3 says so, though it answers it with 404 too (a HEAD's
// answer has no body to say it in, so there it reads as not found).
func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	var noKey *types.NoSuchKey
	var notFound *types.NotFound
	if errors.As(err, &noKey) || errors.As(err, &notFound) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return true
		case "NoSuchBucket":
			return false
		}
	}
	var resp *awshttp.ResponseError
	return errors.As(err, &resp) && resp.HTTPStatusCode() == http.StatusNotFound
}
