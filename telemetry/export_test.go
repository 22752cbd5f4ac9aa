package telemetry

// TreeCached reports whether the project's tree is in the cache (for
// tests that wait for the feed to drop it).
func (s *Service) TreeCached(project string) bool {
	return s.trees.Cached(project)
}
