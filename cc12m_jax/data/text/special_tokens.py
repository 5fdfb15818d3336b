"""Reserved token ids shared by the vocabulary, tokenizer, models and decoders."""
PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
UNK_ID = 3
MASK_ID = 4
PERSON_ID = 5

PAD = "[PAD]"
BOS = "[BOS]"
EOS = "[EOS]"
UNK = "[UNK]"
MASK = "[MASK]"
PERSON = "<PERSON>"

# Position i of this tuple is the token with id i; every vocabulary starts so.
RESERVED_TOKENS = (PAD, BOS, EOS, UNK, MASK, PERSON)
WORDPIECE_SUFFIX = "##"
