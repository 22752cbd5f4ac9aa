package exporter

// DropCache forgets the compressed per-host series, so that the next
// scrape compresses them all (the benchmark's cold scrape).
func (s *Service) DropCache() {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	s.cache.n, s.cache.buckets = 0, nil
}
