"""Text <-> token ids for `gpuc generate --prompt`: a HuggingFace tokenizer.json (the `tokenizers`
package) or a SentencePiece model (the `sentencepiece` package), as a .litertlm file carries them.
Both packages are optional (`pip install 'gpuc[llm]'`); a missing one is a clear error saying so.
"""
from __future__ import annotations

from gpuc.errors import GpucError

INSTALL = "pip install 'gpuc[llm]'"


class TokenizerError(GpucError):
    """A tokenizer that cannot be loaded (missing package, bad file) or a token it does not know."""


class Tokenizer:
    def __init__(self, kind: str, data: bytes, name: str = "tokenizer"):
        self.kind, self.name = kind, name
        if kind == "hf":
            try:
                from tokenizers import Tokenizer as HfTokenizer
            except ImportError:
                raise TokenizerError(f"{name}: a HuggingFace tokenizer needs the `tokenizers` package: "
                                     f"{INSTALL} (or pip install tokenizers)") from None
            try:
                self._tok = HfTokenizer.from_str(bytes(data).decode("utf-8"))
            except Exception as e:  # noqa: BLE001 - the library's errors are plain exceptions
                raise TokenizerError(f"{name}: not a valid HuggingFace tokenizer.json: "
                                     f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        elif kind == "sentencepiece":
            try:
                import sentencepiece
            except ImportError:
                raise TokenizerError(f"{name}: a SentencePiece tokenizer needs the `sentencepiece` package: "
                                     f"{INSTALL} (or pip install sentencepiece)") from None
            self._tok = sentencepiece.SentencePieceProcessor()
            try:
                self._tok.LoadFromSerializedProto(bytes(data))
            except Exception as e:  # noqa: BLE001
                raise TokenizerError(f"{name}: not a valid SentencePiece model: {str(e).splitlines()[0]}") from None
        else:
            raise TokenizerError(f"{name}: unknown tokenizer kind {kind!r}")

    @classmethod
    def from_file(cls, path: str) -> "Tokenizer":
        """tokenizer.json (HuggingFace) or a SentencePiece .model, told apart by their first byte."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise TokenizerError(f"{path}: cannot read the tokenizer: {e.strerror or e}") from None
        return cls("hf" if data.lstrip()[:1] == b"{" else "sentencepiece", data, path)

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size() if self.kind == "hf" else self._tok.get_piece_size()

    def encode(self, text: str) -> list:
        if self.kind == "hf":
            return list(self._tok.encode(text, add_special_tokens=False).ids)
        return list(self._tok.encode(text))

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids]
        if self.kind == "hf":
            return self._tok.decode(ids, skip_special_tokens=False)
        return self._tok.decode(ids)

    def token_ids(self, token, what: str) -> list:
        """A metadata token (a list of ids, or a string of the vocabulary) as ids."""
        if isinstance(token, list):
            return token
        i = self._tok.token_to_id(token) if self.kind == "hf" else self._tok.piece_to_id(token)
        if i is None or (self.kind == "sentencepiece" and i == self._tok.unk_id() and token != self._tok.id_to_piece(i)):
            raise TokenizerError(f"{what}: token {token!r} is not in the tokenizer's vocabulary")
        return [int(i)]


class TextStream:
    """Incremental detokenization: feed ids, get the text they add (decoding the whole sequence and
    holding back an incomplete UTF-8 character, so multi-token characters come out whole)."""

    def __init__(self, tokenizer: Tokenizer):
        self.tok, self.ids, self.sent = tokenizer, [], ""

    def push(self, token: int) -> str:
        self.ids.append(int(token))
        text = self.tok.decode(self.ids)
        if text.endswith("\ufffd"):
            return ""
        same = 0                         # a decoder may re-flow earlier text: emit what follows the common part
        while same < min(len(text), len(self.sent)) and text[same] == self.sent[same]:
            same += 1
        self.sent = text
        return text[same:]
