package objstore_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/objstore"
)

// The examples of AWS's documentation of SigV4 for S3 (the example
// bucket, key and credentials published there), as test vectors.
var (
	awsCreds = objstore.Credentials{AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
	awsTime  = time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)
)

func TestPresignVector(t *testing.T) {
	u, _ := url.Parse("https://examplebucket.s3.amazonaws.com/test.txt")
	got := objstore.Presign("GET", u, nil, "us-east-1", awsCreds, awsTime, 86400*time.Second)
	const want = "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
	if !strings.HasSuffix(got, "X-Amz-Signature="+want) {
		t.Fatalf("got %s, want signature %s", got, want)
	}
	if !strings.Contains(got, "X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request") {
		t.Fatalf("got %s, want the credential scope escaped", got)
	}
}

func TestSignVector(t *testing.T) {
	req, _ := http.NewRequest("GET", "https://examplebucket.s3.amazonaws.com/test.txt", nil)
	req.Header.Set("Range", "bytes=0-9")
	objstore.Sign(req, objstore.EmptySHA256, "us-east-1", awsCreds, awsTime)
	const want = "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, " +
		"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
	if got := req.Header.Get("Authorization"); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
