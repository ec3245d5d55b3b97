package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"
)

// s3API is the part of the S3 client this package uses.
type s3API interface {
	HeadBucket(context.Context, *s3.HeadBucketInput, ...func(*s3.Options)) (*s3.HeadBucketOutput, error)
	PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	DeleteObject(context.Context, *s3.DeleteObjectInput, ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	CreateMultipartUpload(context.Context, *s3.CreateMultipartUploadInput, ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	UploadPart(context.Context, *s3.UploadPartInput, ...func(*s3.Options)) (*s3.UploadPartOutput, error)
	CompleteMultipartUpload(context.Context, *s3.CompleteMultipartUploadInput, ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(context.Context, *s3.AbortMultipartUploadInput, ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
}

var _ s3API = (*s3.Client)(nil)

// s3Objects keeps objects in an S3 bucket under a key prefix. Single PUTs
// and completed multipart uploads are atomic, so an object is whole or
// missing. A save that dies mid-multipart leaves an incomplete upload that
// S3 bills until aborted: give the bucket a lifecycle rule
// (AbortIncompleteMultipartUpload) as for any multipart writer.
type s3Objects struct {
	api         s3API
	bucket      string
	prefix      string // "" or "a/b", no slashes at the ends
	partSize    int64
	concurrency int
}

var _ objects = (*s3Objects)(nil)

// maxParts is S3's limit on the parts of one multipart upload.
const maxParts = 10000

func openS3(ctx context.Context, bucket, prefix string, opts Options) (*s3Objects, error) {
	if opts.PartSize < minPartSize {
		return nil, fmt.Errorf("options: PartSize %d is below S3's minimum part size %d: %w", opts.PartSize, minPartSize, ErrInvalid)
	}
	var loadOpts []func(*config.LoadOptions) error
	if opts.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(opts.Region))
	}
	if opts.AccessKeyID != "" {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(opts.AccessKeyID, opts.SecretAccessKey, opts.SessionToken)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	if cfg.Region == "" {
		if opts.Endpoint == "" {
			return nil, fmt.Errorf("no S3 region: set Options.Region or AWS_REGION: %w", ErrInvalid)
		}
		cfg.Region = "us-east-1" // what S3-compatible services expect when they ignore regions
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = opts.UsePathStyle
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	})
	objs := &s3Objects{api: client, bucket: bucket, prefix: prefix, partSize: opts.PartSize, concurrency: opts.Concurrency}
	if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
		if httpStatus(err) == http.StatusNotFound {
			return nil, fmt.Errorf("bucket %q does not exist: %w: %w", bucket, ErrInvalid, err)
		}
		return nil, fmt.Errorf("bucket %q: %w", bucket, err)
	}
	return objs, nil
}

// httpStatus returns the HTTP status of an SDK error, 0 if there is none.
func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// isNoSuchKey reports whether err says the object does not exist.
func isNoSuchKey(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	var api smithy.APIError
	return errors.As(err, &nsk) || errors.As(err, &nf) ||
		errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NotFound")
}

func (o *s3Objects) key(k string) string {
	if o.prefix == "" {
		return k
	}
	return o.prefix + "/" + k
}

func (o *s3Objects) put(ctx context.Context, key string, r io.ReaderAt, size int64) error {
	if size > o.partSize {
		return o.putMultipart(ctx, key, r, size)
	}
	_, err := o.api.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(o.bucket),
		Key:           aws.String(o.key(key)),
		Body:          io.NewSectionReader(r, 0, size),
		ContentLength: aws.Int64(size),
	})
	if err != nil {
		return fmt.Errorf("s3 put %s: %w", key, err)
	}
	return nil
}

// putMultipart uploads a large object in parts, up to o.concurrency at
// once. The object appears only when the upload completes; on failure the
// upload is aborted.
func (o *s3Objects) putMultipart(ctx context.Context, key string, r io.ReaderAt, size int64) error {
	partSize := max(o.partSize, (size+maxParts-1)/maxParts)
	n := int((size + partSize - 1) / partSize)
	created, err := o.api.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(o.bucket),
		Key:    aws.String(o.key(key)),
	})
	if err != nil {
		return fmt.Errorf("s3 multipart put %s: %w", key, err)
	}
	parts := make([]types.CompletedPart, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.concurrency)
	for i := range n {
		off := int64(i) * partSize
		length := min(partSize, size-off)
		g.Go(func() error {
			out, err := o.api.UploadPart(gctx, &s3.UploadPartInput{
				Bucket:        aws.String(o.bucket),
				Key:           aws.String(o.key(key)),
				UploadId:      created.UploadId,
				PartNumber:    aws.Int32(int32(i + 1)),
				Body:          io.NewSectionReader(r, off, length),
				ContentLength: aws.Int64(length),
			})
			if err != nil {
				return fmt.Errorf("part %d of %d: %w", i+1, n, err)
			}
			parts[i] = types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1))}
			return nil
		})
	}
	err = g.Wait()
	if err == nil {
		_, err = o.api.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket:          aws.String(o.bucket),
			Key:             aws.String(o.key(key)),
			UploadId:        created.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		})
	}
	if err != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_, aerr := o.api.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: aws.String(o.bucket), Key: aws.String(o.key(key)), UploadId: created.UploadId,
		})
		if aerr != nil {
			return fmt.Errorf("s3 multipart put %s: %w (abort also failed: %v)", key, err, aerr)
		}
		return fmt.Errorf("s3 multipart put %s: %w", key, err)
	}
	return nil
}

func (o *s3Objects) get(ctx context.Context, key string) (io.ReadCloser, error) {
	out, err := o.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(o.bucket), Key: aws.String(o.key(key))})
	if isNoSuchKey(err) {
		return nil, errNoObject
	}
	if err != nil {
		return nil, fmt.Errorf("s3 get %s: %w", key, err)
	}
	return out.Body, nil
}

func (o *s3Objects) children(ctx context.Context, prefix string) ([]string, error) {
	listPrefix := o.key(prefix) + "/"
	var names []string
	pages := s3.NewListObjectsV2Paginator(o.api, &s3.ListObjectsV2Input{
		Bucket:    aws.String(o.bucket),
		Prefix:    aws.String(listPrefix),
		Delimiter: aws.String("/"),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("s3 list %s: %w", prefix, err)
		}
		for _, cp := range page.CommonPrefixes {
			name := strings.TrimSuffix(strings.TrimPrefix(aws.ToString(cp.Prefix), listPrefix), "/")
			if name != "" {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

func (o *s3Objects) remove(ctx context.Context, key string) error {
	_, err := o.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(o.bucket), Key: aws.String(o.key(key))})
	if err != nil && !isNoSuchKey(err) {
		return fmt.Errorf("s3 delete %s: %w", key, err)
	}
	return nil
}

// removeAll deletes object by object rather than with DeleteObjects, which
// several S3-compatible services reject without a Content-MD5 the SDK no
// longer sends; checkpoints have few objects.
func (o *s3Objects) removeAll(ctx context.Context, prefix string) error {
	pages := s3.NewListObjectsV2Paginator(o.api, &s3.ListObjectsV2Input{
		Bucket: aws.String(o.bucket),
		Prefix: aws.String(o.key(prefix) + "/"),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("s3 list %s: %w", prefix, err)
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(o.concurrency)
		for _, obj := range page.Contents {
			g.Go(func() error {
				_, err := o.api.DeleteObject(gctx, &s3.DeleteObjectInput{Bucket: aws.String(o.bucket), Key: obj.Key})
				if err != nil && !isNoSuchKey(err) {
					return fmt.Errorf("s3 delete %s: %w", aws.ToString(obj.Key), err)
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
	return nil
}
