package main

import (
	"cmp"
	"fmt"
	"os"
	"strconv"

	"github.com/eimhq/eim/client"
)

// eim objectstorage set|get|delete: the project's object storage (package
// objstore), where its devices' workload data is uploaded.

const objectStorageUsage = `Usage:
  eim objectstorage set --endpoint URL --bucket B --access-key-id K
                        [--secret-key-stdin | --secret-key S] [--region R] [--path-style]
                        [--key-prefix P/] [--ca-cert FILE] [--max-file-size BYTES]
                        [--bucket-per-device TEMPLATE]
  eim objectstorage get
  eim objectstorage delete

set creates or replaces the project's S3-compatible object storage; without a
secret key a replace keeps the stored one. The bucket is tried with the keys
(a HEAD of the bucket) and the setting is saved either way: REACHABLE says it
answered, otherwise why not. --secret-key-stdin reads the key from standard
input (one line); --secret-key shows it to other users of the machine (ps).
--bucket-per-device eim-{hostId} gives each device a bucket of its own,
created on its first grant; --bucket then keeps the workloads' shared
ingress files. delete sends the devices' uploads to the server's embedded
store again.
`

func (c *cli) objectStorage(args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(c.stdout, objectStorageUsage)
		if len(args) == 0 {
			return usagef("objectstorage: a verb is required (set, get, delete)")
		}
		return nil
	}
	verb, rest := args[0], args[1:]
	switch verb {
	case "set":
		return c.objectStorageSet(rest)
	case "get", "delete":
		fs := c.flagSet("eim objectstorage "+verb, "eim objectstorage "+verb, "")
		c.globalFlags(fs)
		pos, err := c.parseAll(fs, rest)
		if err != nil {
			return err
		}
		if err := wantArgs("objectstorage "+verb, pos, 0, "no arguments"); err != nil {
			return err
		}
		cl, err := c.clientFor()
		if err != nil {
			return err
		}
		if verb == "delete" {
			if err := cl.DeleteObjectStorage(c.ctx, c.g.project); err != nil {
				return err
			}
			fmt.Fprintf(c.stdout, "deleted the object storage of %s\n", c.g.project)
			return nil
		}
		o, err := cl.GetObjectStorage(c.ctx, c.g.project)
		if err != nil {
			return err
		}
		return c.printObjectStorage(o)
	default:
		return usagef("objectstorage: unknown verb %q (set, get, delete)", verb)
	}
}

func (c *cli) objectStorageSet(args []string) error {
	var (
		in             client.ObjectStorageInput
		secret, caFile string
		fromStdin      bool
		maxSize        string
	)
	fs := c.flagSet("eim objectstorage set", "eim objectstorage set --endpoint URL --bucket B --access-key-id K …", "")
	c.globalFlags(fs)
	fs.StringVar(&in.Endpoint, "endpoint", "", "the S3 endpoint: https://host[:port]")
	fs.StringVar(&in.Bucket, "bucket", "", "the bucket")
	fs.StringVar(&in.Region, "region", "", "the bucket's region (default us-east-1)")
	fs.BoolVar(&in.PathStyle, "path-style", false, "address the bucket as ENDPOINT/BUCKET (default: BUCKET.HOST)")
	fs.StringVar(&in.KeyPrefix, "key-prefix", "", "put before every device's prefix (ends with /)")
	fs.StringVar(&in.AccessKeyID, "access-key-id", "", "the access key ID")
	fs.StringVar(&secret, "secret-key", "", "the secret access key (visible in ps: prefer --secret-key-stdin)")
	fs.BoolVar(&fromStdin, "secret-key-stdin", false, "read the secret access key from standard input")
	fs.StringVar(&caFile, "ca-cert", "", "PEM file of the CAs the endpoint's TLS certificate is checked against")
	fs.StringVar(&maxSize, "max-file-size", "", "the largest file a device may upload, in bytes (default 5 GiB)")
	fs.StringVar(&in.BucketPerDevice, "bucket-per-device", "", "a bucket per device: the buckets' name template, with {hostId} (e.g. eim-{hostId})")
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("objectstorage set", pos, 0, "no arguments"); err != nil {
		return err
	}
	if in.SecretAccessKey, err = c.secretArg("objectstorage set", "secret-key", secret, fromStdin); err != nil {
		return err
	}
	if maxSize != "" {
		n, err := strconv.ParseInt(maxSize, 10, 64)
		if err != nil {
			return usagef("--max-file-size: %q is not a number of bytes", maxSize)
		}
		in.MaxFileSize = n
	}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return usagef("--ca-cert: %v", err)
		}
		in.CACert = string(b)
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	o, err := cl.PutObjectStorage(c.ctx, c.g.project, in)
	if err != nil {
		return err
	}
	return c.printObjectStorage(o)
}

func (c *cli) printObjectStorage(o *client.ObjectStorage) error {
	switch c.g.output {
	case "json":
		return c.printJSON(o)
	case "id":
		fmt.Fprintln(c.stdout, o.Bucket)
		return nil
	}
	style := "virtual-host"
	if o.PathStyle {
		style = "path"
	}
	reach := cmp.Or(o.Reachable.Status, "not checked")
	if o.Reachable.LastError != "" {
		reach += ": " + o.Reachable.LastError
	}
	return c.printTable([]string{"ENDPOINT", "BUCKET", "PREFIX", "REGION", "STYLE", "ACCESS KEY", "SECRET", "REACHABLE"},
		[][]string{{o.Endpoint, o.Bucket, cmp.Or(o.KeyPrefix, "-"), o.Region, style, o.AccessKeyID,
			map[bool]string{true: "set", false: "none"}[o.SecretKeySet], reach}})
}
