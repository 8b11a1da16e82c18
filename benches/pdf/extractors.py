"""Python PDF extractors on the FinanceBench dev filings: speed and evidence bigrams.

For each extractor (pypdf, pdfplumber, pypdfium2: the pdfium library that
pdfium-render wraps) this reads every page of every filing in
`../shared/data/financebench_dev/pdfs`, timing the extraction, and scores
each FinanceBench evidence page: the share of the word bigrams of its
`evidence_text_full_page` that the extractor's text of that page holds.
The same scoring runs on edudb's own extraction in `cargo bench --bench
pdf` (a word bigram is the same there: lowercased runs of letters and
digits, consecutive pairs).

    python benches/pdf/extractors.py [DATA_DIR] > results.json

Prints one JSON object per extractor: pages, seconds, pages_per_s,
evidence_pages, bigram_recall (mean over evidence pages).
"""

import json
import re
import sys
import time
from pathlib import Path

WORD = re.compile(r"[^\W_]+", re.UNICODE)


def words(text: str) -> list:
    return WORD.findall(text.lower())


def bigrams(text: str) -> set:
    w = words(text)
    return set(zip(w, w[1:]))


def recall(evidence: str, extracted: str) -> float:
    wanted = bigrams(evidence)
    if not wanted:
        return 1.0
    return len(wanted & bigrams(extracted)) / len(wanted)


def pypdf_pages(path: Path):
    import pypdf

    reader = pypdf.PdfReader(str(path))
    return [page.extract_text() or "" for page in reader.pages]


def pdfplumber_pages(path: Path):
    import pdfplumber

    with pdfplumber.open(str(path)) as pdf:
        return [page.extract_text() or "" for page in pdf.pages]


def pdfium_pages(path: Path):
    import pypdfium2

    pdf = pypdfium2.PdfDocument(str(path))
    pages = []
    for index in range(len(pdf)):
        page = pdf[index]
        pages.append(page.get_textpage().get_text_range())
    return pages


EXTRACTORS = {"pypdf": pypdf_pages, "pdfplumber": pdfplumber_pages, "pdfium": pdfium_pages}


def main() -> None:
    data = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/financebench_dev")
    questions = [json.loads(line) for line in open(data / "questions.jsonl")]
    evidence = {}
    for q in questions:
        for e in q["evidence"]:
            evidence[(q["doc_name"], e["evidence_page_num"])] = e["evidence_text_full_page"]
    pdfs = sorted((data / "pdfs").glob("*.pdf"))
    for name, extract in EXTRACTORS.items():
        texts = {}
        pages = 0
        start = time.perf_counter()
        for pdf in pdfs:
            page_texts = extract(pdf)
            pages += len(page_texts)
            texts[pdf.stem] = page_texts
        seconds = time.perf_counter() - start
        scores = [
            recall(full, texts[doc][page] if page < len(texts[doc]) else "")
            for (doc, page), full in sorted(evidence.items())
        ]
        print(
            json.dumps(
                {
                    "extractor": name,
                    "pages": pages,
                    "seconds": round(seconds, 2),
                    "pages_per_s": round(pages / seconds, 1),
                    "evidence_pages": len(scores),
                    "bigram_recall": round(sum(scores) / len(scores), 4),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
