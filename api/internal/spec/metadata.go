package spec

import "github.com/eimhq/eim"

// The original's metadata broker, served for its web UI (label
// suggestions).

const tagMetadata = "Metadata"

func addMetadata(ps *pathSet) {
	key := o("name", "key", "in", "query", "required", true, "description", "The pair's key (compared lower-cased).",
		"schema", o("type", "string"))
	value := o("name", "value", "in", "query", "description", "The pair's value (compared lower-cased); absent: empty.",
		"schema", o("type", "string"))
	ps.add("/metadata",
		op{method: "get", id: "MetadataService_GetMetadata", tag: tagMetadata, summary: "The label keys and values the project uses",
			desc: "The original's metadata broker, as its web UI calls it: every label key the project's regions, sites and hosts " +
				"carry and every pair posted here, each key once with its values, sorted. Any role on the project may read it.",
			ok: okJSON("The keys and their values.", ref("MetadataResponse"))},
		op{method: "post", id: "MetadataService_CreateOrUpdateMetadata", tag: tagMetadata, summary: "Record label pairs",
			desc: "Records pairs for the suggestions, lower-cased as the original's broker stored them; a pair recorded already " +
				"changes nothing. Each is checked as a resource's label (key required; the patterns of metadata items), at most " +
				"100 per call. Answers the suggestions as GET does. Needs the project's _im-rw role.",
			write: true,
			body:  ref("MetadataList"),
			ok:    okJSON("The keys and their values.", ref("MetadataResponse"))},
		op{method: "delete", id: "MetadataService_Delete", tag: tagMetadata, summary: "Forget a recorded pair",
			desc: "Removes a pair recorded by POST; one that was not recorded is 404. A label the project's resources carry " +
				"stays among the suggestions while they do. Answers the suggestions as GET does. Needs the project's _im-rw role.",
			write: true, params: []any{key, value},
			ok: okJSON("The keys and their values.", ref("MetadataResponse"))},
	)
}

func metadataSchemas(into *obj) {
	into.set("MetadataList", o("type", "object", "additionalProperties", false,
		"description", "Label pairs to record (the original broker's MetadataList).",
		"properties", o("metadata", o("type", "array", "maxItems", eim.MaxMetadataItems, "items", ref("MetadataItem"))),
		"required", []string{"metadata"}))
	into.set("StoredMetadata", o("type", "object",
		"description", "A label key and the values the project uses with it.",
		"properties", o("key", o("type", "string"), "values", o("type", "array", "items", o("type", "string"))),
		"required", []string{"key", "values"}))
	into.set("MetadataResponse", o("type", "object",
		"properties", o("metadata", o("type", "array", "items", ref("StoredMetadata"))),
		"required", []string{"metadata"}))
}
