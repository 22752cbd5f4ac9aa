package objstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
)

// putSetting answers PUT …/objectstorage: the setting is checked (a 400
// names the field), the bucket is tried with the credentials (a HEAD of
// the bucket), and the setting is saved whatever the outcome: the
// outcome is its Reachable condition, so a bucket created after its
// setting, or a network not yet open, does not stop the save.
func (s *Service) putSetting(w http.ResponseWriter, r *http.Request, c *call) error {
	var in eim.ObjectStorageInput
	if err := apiv2.DecodeStrict(r, &in); err != nil {
		return err
	}
	o := &eim.ObjectStorage{Project: c.project, Endpoint: strings.TrimSuffix(strings.TrimSpace(in.Endpoint), "/"), Bucket: strings.TrimSpace(in.Bucket),
		KeyPrefix: in.KeyPrefix, Region: strings.TrimSpace(in.Region), PathStyle: in.PathStyle, AccessKeyID: strings.TrimSpace(in.AccessKeyID),
		CACert: in.CACert, MaxFileSize: in.MaxFileSize, BucketPerDevice: strings.TrimSpace(in.BucketPerDevice)}
	if err := o.Validate(); err != nil {
		return err
	}
	purpose := eim.ObjectStorageSecretPurpose(c.project)
	var secret string
	if in.SecretAccessKey != nil {
		if err := eim.CheckStorageSecret(*in.SecretAccessKey); err != nil {
			return err
		}
		secret = *in.SecretAccessKey
		o.SealedSecretKey = s.o.Key.SealText(secret, purpose)
	} else {
		old, err := s.o.Store.GetObjectStorage(r.Context(), c.project)
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return eim.Errorf(eim.EINVALID, "secretAccessKey: required (the project has no object storage yet)")
		}
		if err != nil {
			return err
		}
		if secret, err = s.o.Key.OpenText(old.SealedSecretKey, purpose); err != nil {
			return fmt.Errorf("open the stored secret key: %w", err)
		}
	}
	o.Reachable = s.Check(r.Context(), o, secret)
	if err := s.o.Store.PutObjectStorage(r.Context(), o); err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, o.View())
	return nil
}

func (s *Service) getSetting(w http.ResponseWriter, r *http.Request, c *call) error {
	o, err := s.o.Store.GetObjectStorage(r.Context(), c.project)
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, o.View())
	return nil
}

func (s *Service) deleteSetting(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.o.Store.DeleteObjectStorage(r.Context(), c.project); err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, struct{}{}) // {}, as the v1 API's deletes
	return nil
}

// Check tries o's bucket with the secret key: a signed HEAD of the bucket.
// It says REACHABLE on a 2xx, else UNREACHABLE with why (the status and
// S3's error code, or the network's error).
func (s *Service) Check(ctx context.Context, o *eim.ObjectStorage, secret string) eim.StorageReachable {
	now := s.o.Now()
	res := eim.StorageReachable{Status: eim.StorageUnreachable, CheckedAt: eim.NewTime(now)}
	ctx, cancel := context.WithTimeout(ctx, s.o.CheckTimeout)
	defer cancel()
	client, err := httpClient(o.CACert, s.o.DialContext)
	if err != nil {
		res.LastError = err.Error()
		return res
	}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, objectURL(o, "").String(), nil)
	if err != nil {
		res.LastError = err.Error()
		return res
	}
	Sign(req, EmptySHA256, o.Region, Credentials{AccessKeyID: o.AccessKeyID, SecretKey: secret}, now)
	resp, err := client.Do(req)
	if err != nil {
		res.LastError = err.Error()
		return res
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		res.Status = eim.StorageReachableOK
		return res
	}
	res.LastError = "HEAD bucket: " + resp.Status
	if code := resp.Header.Get("X-Amz-Error-Code"); code != "" {
		res.LastError += " (" + code + ")"
	}
	switch resp.StatusCode {
	case http.StatusForbidden:
		res.LastError += ": the credentials are refused or lack access to the bucket"
	case http.StatusNotFound:
		res.LastError += ": no such bucket"
	case http.StatusMovedPermanently:
		res.LastError += ": the bucket is in another region (" + resp.Header.Get("X-Amz-Bucket-Region") + ")"
	}
	return res
}

// httpClient is a client trusting caPEM ("" the system's roots),
// dialing with dial (nil the default).
func httpClient(caPEM string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if dial != nil {
		tr.DialContext = dial
	}
	if caPEM != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(caPEM)) {
			return nil, fmt.Errorf("caCert: no certificate")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, nil
}
