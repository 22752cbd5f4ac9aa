package spec

import (
	"strings"

	"github.com/eimhq/eim"
)

// A project's object storage and the embedded store's files (package
// objstore, the objectstorage module).

const tagObjectStorage = "Object storage"

func addObjectStorage(ps *pathSet) {
	const module = " An operation of the objectstorage module (served where it runs); an EIM addition. See docs/objectstorage.md."
	ps.add("/objectstorage",
		op{method: "get", id: "getObjectStorage", tag: tagObjectStorage, summary: "Get the project's object storage",
			desc: "The S3-compatible bucket the project's devices upload their workloads' data to, never its secret key " +
				"(secretAccessKeySet says one is stored), with the outcome of the bucket's check at the last PUT. 404 when the " +
				"project has none (its devices then upload to the embedded store). Needs a role on the project." + module,
			ok: okJSON("The setting.", ref("ObjectStorage"))},
		op{method: "put", id: "putObjectStorage", tag: tagObjectStorage, summary: "Create or replace the project's object storage", write: true,
			desc: "Sets the project's bucket. The secret key is required when the project has none yet; left out on a replace, " +
				"the stored one is kept. It is stored sealed under the deployment's secrets key, never answered, and shown as " +
				"redacted in the audit log. The bucket is tried with the credentials (a signed HEAD) and the setting is saved " +
				"whatever the outcome, which is its reachable condition. A bad field is 400 naming it. Needs the project's " +
				"_im-rw role." + module,
			body: ref("ObjectStorageInput"),
			ok:   okJSON("The setting as stored.", ref("ObjectStorage"))},
		op{method: "delete", id: "deleteObjectStorage", tag: tagObjectStorage, summary: "Delete the project's object storage", write: true,
			desc: "Removes the setting: the project's devices upload to the embedded store again. Needs the project's _im-rw role." + module,
			ok:   o("$ref", "#/components/responses/Deleted")},
	)
	host := o("name", "hostId", "in", "path", "required", true,
		"description", "ID of the host, or "+eim.SharedIngressDir+" for the files every device of a workload downloads.",
		"schema", o("type", "string", "pattern", "^(?:"+strings.TrimSuffix(strings.TrimPrefix(idPattern(eim.KindHost), "^"), "$")+"|"+eim.SharedIngressDir+")$"))
	file := o("name", "path", "in", "path", "required", true,
		"description", "The file's path under the host's prefix (slashes included).", "schema", o("type", "string"))
	ps.add("/edgedata/{hostId}",
		op{method: "get", id: "listEdgeData", tag: tagObjectStorage, summary: "List a host's files in the embedded store",
			params: []any{host,
				o("name", "prefix", "in", "query", "description", "Only the paths that start with it.", "schema", o("type", "string")),
				pref("pageSize"), pref("offset")},
			desc: "The files in the server's embedded store (used when the project has no object storage) under the host's " +
				"prefix, by path (<workload>/<target>/<file>): those its workloads uploaded and those put for it to download; " +
				"under " + eim.SharedIngressDir + ", the files put for every device of a workload. Needs a role on the project." + module,
			ok: okJSON("One page of files.", ref("EdgeObjectList"))},
	)
	ps.add("/edgedata/{hostId}/{path}",
		op{method: "get", id: "getEdgeData", tag: tagObjectStorage, summary: "Read one of a host's files in the embedded store",
			params: []any{host, file},
			desc:   "The file's content, as an attachment (ranges supported). 404 when there is no such file. Needs a role on the project." + module,
			ok:     o("description", "The content.", "content", o("application/octet-stream", o("schema", o("type", "string", "format", "binary"))))},
		op{method: "put", id: "putEdgeData", tag: tagObjectStorage, summary: "Put a file into the embedded store", write: true, rawBody: true,
			params: []any{host, file},
			desc: "Stores the body as the file (replacing it), for the ingress data paths that read it: a host's " +
				"<workload>/<target>/<file> goes to that device, " + eim.SharedIngressDir + "/<workload>/<target>/<file> to every " +
				"device of the workload (docs/workloads.md). 409 when the project has object storage: its devices read the bucket, " +
				"where files are put with S3's own tools. Needs the project's _im-rw role." + module,
			ok: okJSON("The file as stored.", ref("EdgeObject"))},
		op{method: "delete", id: "deleteEdgeData", tag: tagObjectStorage, summary: "Delete a file of the embedded store", write: true,
			params: []any{host, file},
			desc:   "Removes the file: the devices that downloaded it remove their copy at their next pass. 404 when there is no such file. Needs the project's _im-rw role." + module,
			ok:     o("$ref", "#/components/responses/Deleted")},
	)
}

func objectStorageSchemas(into *obj) {
	str := func(desc string) *obj { return o("type", "string", "description", desc) }
	endpoint := o("type", "string", "maxLength", eim.MaxStorageEndpoint, "description", "The S3 API's base URL: https (or http) with a host and port only.")
	bucket := o("type", "string", "minLength", 3, "maxLength", 63, "description", "The bucket (S3's naming rules).")
	keyPrefix := o("type", "string", "maxLength", eim.MaxStorageKeyPfx, "description", "Put before every device's prefix: empty, or segments ending with '/'.")
	region := str("The region the signatures name (default us-east-1).")
	pathStyle := o("type", "boolean", "description", "Address the bucket as endpoint/bucket/key; otherwise bucket.host/key.")
	access := o("type", "string", "minLength", 1, "maxLength", 128, "description", "The access key ID.")
	ca := o("type", "string", "maxLength", eim.MaxStorageCACert, "description", "PEM bundle the endpoint's TLS certificate is checked against; empty: the system's roots.")
	perDevice := o("type", "string", "maxLength", 63,
		"description", "A bucket per device: the template of each device's bucket name, with "+eim.HostIDPlaceholder+" where its host ID goes "+
			"(e.g. eim-"+eim.HostIDPlaceholder+"). Each device's files (its uploads, its own ingress files) go to its bucket, created with "+
			"the credentials on its first grant; bucket keeps the workloads' shared ingress files. Absent or empty: every device under bucket.")
	maxSize := o("type", "integer", "format", "int64", "minimum", 0, "maximum", eim.DefaultMaxUploadSize,
		"description", "The largest file a device may upload, in bytes (0 in a PUT: the default, 5 GiB).")
	into.set("ObjectStorageInput", o("type", "object", "additionalProperties", false,
		"description", "A project's object storage; it replaces the stored one.",
		"properties", o("endpoint", endpoint, "bucket", bucket, "keyPrefix", keyPrefix, "region", region, "pathStyle", pathStyle,
			"accessKeyId", access,
			"secretAccessKey", o("type", "string", "maxLength", eim.MaxStorageSecret, "writeOnly", true,
				"description", "The secret access key. Required for a new setting; absent on a replace: the stored one is kept."),
			"caCert", ca, "maxFileSize", maxSize, "bucketPerDevice", perDevice),
		"required", []string{"endpoint", "bucket", "accessKeyId"}))
	into.set("StorageReachable", o("type", "object", "additionalProperties", false,
		"description", "The outcome of the bucket's check at the last PUT.",
		"properties", o(
			"status", o("type", "string", "enum", []string{eim.StorageReachableOK, eim.StorageUnreachable}),
			"lastError", str("Why the check failed."),
			"checkedAt", o("type", "string", "format", "date-time", "description", "When."))))
	into.set("ObjectStorage", o("type", "object", "additionalProperties", false,
		"description", "A project's object storage, without its secret key.",
		"properties", o("endpoint", endpoint, "bucket", bucket, "keyPrefix", keyPrefix, "region", region, "pathStyle", pathStyle,
			"accessKeyId", access,
			"secretAccessKeySet", o("type", "boolean", "description", "Whether a secret key is stored (it is never answered)."),
			"caCert", ca, "maxFileSize", maxSize, "bucketPerDevice", perDevice,
			"reachable", ref("StorageReachable"), "timestamps", ref("Timestamps")),
		"required", []string{"endpoint", "bucket", "region", "pathStyle", "accessKeyId", "secretAccessKeySet", "maxFileSize", "reachable", "timestamps"}))
	into.set("EdgeObject", o("type", "object", "additionalProperties", false,
		"description", "A file in the embedded store.",
		"properties", o("path", str("Its path under the host's prefix."),
			"size", o("type", "integer", "format", "int64", "description", "Bytes."),
			"updatedAt", o("type", "string", "format", "date-time", "description", "When it was last uploaded.")),
		"required", []string{"path", "size", "updatedAt"}))
	into.set("EdgeObjectList", o("type", "object", "additionalProperties", false,
		"properties", o("objects", o("type", "array", "items", ref("EdgeObject")),
			"totalElements", o("type", "integer", "description", "Files matching in all."),
			"hasNext", o("type", "boolean", "description", "Whether a page follows.")),
		"required", []string{"objects", "totalElements", "hasNext"}))
}
