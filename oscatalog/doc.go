// Package oscatalog is EIM's OS module: the catalog of OS profiles, read
// from YAML manifests (those shipped in the binary and an operator's own
// directory), loaded into every project as OS resources, and the
// osUpdateAvailable of instances whose immutable OS has a newer version.
//
// The Manager is a level-based reconciler over the change feed: a project
// created gets the catalog at once; an OS resource or an instance changed
// recomputes what instances of that project have to say; and every refresh
// interval (12 h by default, as the original) the manifests are read again
// and every project brought in line. It creates OS resources that are
// missing and updates those it made when their manifest changed; it never
// deletes one, and never touches an OS a user made.
package oscatalog
