package keys

import "testing"

// BenchmarkJMESPathKey: what KEY_JMESPATH adds to a delivery on the sample
// task — decoding its data and hashing a selection — beside BenchmarkDerive,
// which every delivery pays anyway (compare the two in one run).
func BenchmarkJMESPathKey(b *testing.B) {
	data, _ := sampleData(b)
	for _, expr := range []string{"tenant_id", "[tenant_id, task_type, operation]"} {
		j, err := CompileJMESPath(expr)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(expr, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				doc, err := DecodeJSON(data)
				if err == nil {
					_, err = j.Hash(doc)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
