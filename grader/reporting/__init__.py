"""What a student may see and how it is written: disclosure, safe text, pages, atomic writes."""
