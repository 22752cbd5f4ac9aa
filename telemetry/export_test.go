package telemetry

// TreeCached reports whether the project's tree is in the cache (for
// tests that wait for the feed to drop it).
func (s *Service) TreeCached(project string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.projects[project]
	return ps != nil && ps.tree != nil
}
