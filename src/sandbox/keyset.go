package sandbox

import "slices"

// ResumeAfter is where a list resumes after a key: the index of the first
// item of sorted that comes after key, by cmp (negative when an item sorts
// before the key, zero when it is the key).
//
// Every front pages its lists this way (keyset paging): the Sandbox API by
// namespace and name, the e2b surface by start time and id. A page resumes
// after the last item the previous one returned, in the view as it is when
// the page is asked for, so across a fleet that changes while a client
// pages no item is listed twice and an item that exists for the whole
// paging is listed exactly once. The key need not exist any more.
func ResumeAfter[T, K any](sorted []T, key K, cmp func(T, K) int) int {
	i, _ := slices.BinarySearchFunc(sorted, key, func(item T, key K) int {
		if c := cmp(item, key); c != 0 {
			return c
		}
		return -1 // the key itself sorts before: the search lands after it
	})
	return i
}
