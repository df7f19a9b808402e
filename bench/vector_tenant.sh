# bench/vector_tenant.sh: sourced by bench/node_bench_image.sh and bench/shard_bench_move.sh; the
# loader of their tenant: `docs` documents, each a 128-dimension vector under @hnsw (cosine) and
# a short title, posted to a tenant's /batch 1 000 documents a statement and 10 statements a
# request, the vectors drawn by awk from a fixed seed (so every run loads the same tenant).
#
# load_vector_docs <tenant URL, http://host:port/t/<t>> <docs> <dim> <scratch file>
# The tenant exists with `create collection docs (title text, v vector<dim> @hnsw)`.
load_vector_docs() {
    local url=$1 docs=$2 dim=$3 scratch=$4 chunk=1000 from
    for ((from = 1; from <= docs; from += chunk * 10)); do
        awk -v from="$from" -v docs="$docs" -v chunk="$chunk" -v dim="$dim" 'BEGIN {
            srand(from)
            for (s = from; s < from + 10 * chunk && s <= docs; s += chunk) {
                line = "{\"query\":\"insert docs $1\",\"params\":[["
                for (id = s; id < s + chunk && id <= docs; id++) {
                    v = sprintf("%.4f", rand() + 0.0001)
                    for (d = 1; d < dim; d++) v = v "," sprintf("%.4f", rand() - 0.5)
                    line = line (id > s ? "," : "") "{\"_id\":" id ",\"title\":\"doc " id "\",\"v\":[" v "]}"
                }
                print line "]]}"
            }
        }' >"$scratch"
        curl -sS --fail-with-body -X POST -H 'Content-Type: application/x-ndjson' \
            --data-binary @"$scratch" "$url/batch" >/dev/null
    done
}
