package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"

	"github.com/eimhq/eim"
)

// A bucket per device (eim.ObjectStorage.BucketPerDevice): a device's
// grants address its own bucket, created with the setting's credentials
// the first time a grant needs it. The buckets known to exist are
// remembered per process (a bucket deleted behind EIM's back is created
// again after a restart).

// forDevice is the setting as host's grants use it: its bucket is the
// device's.
func forDevice(o *eim.ObjectStorage, host string) *eim.ObjectStorage {
	if o.BucketPerDevice == "" {
		return o
	}
	d := *o
	d.Bucket = o.DeviceBucket(host)
	return &d
}

// ensureBucket creates o's bucket when it does not exist (a HEAD answered
// 404, then a CreateBucket). Errors are EUNAVAILABLE: the device asks
// again later.
func (s *Service) ensureBucket(ctx context.Context, o *eim.ObjectStorage, creds Credentials) error {
	k := o.Project + "\x00" + o.Endpoint + "\x00" + o.Bucket
	s.mu.Lock()
	known := s.buckets[k]
	s.mu.Unlock()
	if known {
		return nil
	}
	client, err := httpClient(o.CACert, s.o.DialContext)
	if err != nil {
		return eim.Errorf(eim.EPRECONDITION, "object storage of %s: %v", o.Project, err)
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, s.o.CheckTimeout)
	defer cancel()
	code, errCode, err := s.bucketCall(ctx, client, o, creds, http.MethodHead, nil)
	if err != nil {
		return eim.Errorf(eim.EUNAVAILABLE, "bucket %s: %v", o.Bucket, err)
	}
	if code == http.StatusNotFound {
		var body []byte
		if o.Region != "us-east-1" {
			body = []byte(`<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>` +
				o.Region + `</LocationConstraint></CreateBucketConfiguration>`)
		}
		code, errCode, err = s.bucketCall(ctx, client, o, creds, http.MethodPut, body)
		if err != nil {
			return eim.Errorf(eim.EUNAVAILABLE, "create bucket %s: %v", o.Bucket, err)
		}
		if code == http.StatusConflict && errCode == "BucketAlreadyOwnedByYou" {
			code = http.StatusOK
		}
		if code/100 != 2 {
			return eim.Errorf(eim.EUNAVAILABLE, "create bucket %s: %d %s", o.Bucket, code, errCode)
		}
		s.log.Info("created a device's bucket", "project", o.Project, "bucket", o.Bucket)
	} else if code/100 != 2 {
		return eim.Errorf(eim.EUNAVAILABLE, "bucket %s: HEAD answered %d %s", o.Bucket, code, errCode)
	}
	s.mu.Lock()
	s.buckets[k] = true
	s.mu.Unlock()
	return nil
}

// bucketCall sends a signed request to o's bucket: its status and S3
// error code.
func (s *Service) bucketCall(ctx context.Context, client *http.Client, o *eim.ObjectStorage, creds Credentials, method string, body []byte) (int, string, error) {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, objectURL(o, "").String(), rd)
	if err != nil {
		return 0, "", err
	}
	sum := sha256.Sum256(body)
	Sign(req, hex.EncodeToString(sum[:]), o.Region, creds, s.o.Now())
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	code := resp.Header.Get("X-Amz-Error-Code")
	if code == "" {
		code = s3ErrorCode(b)
	}
	return resp.StatusCode, code, nil
}
