"""``agent_memory.review_link``: the link the review page's server accepts, minted in Python."""

import base64
import json
import os
import tempfile
import unittest

import agent_memory
from agent_memory import MemoryValidationError

SECRET = b"0123456789abcdef0123456789abcdef"


def payload(link: str) -> dict:
    token = link.split("token=", 1)[1]
    encoded = token.split(".", 1)[0]
    return json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))


class ReviewLinkTest(unittest.TestCase):
    def test_a_link_names_the_user_under_the_base_url(self):
        link = agent_memory.review_link("app", "user-1", base_url="https://memory.example.com",
                                        secret=SECRET, ttl_seconds=60)
        self.assertTrue(link.startswith("https://memory.example.com/review/open?token="), link)
        claims = payload(link)
        self.assertEqual((claims["app"], claims["user"]), ("app", "user-1"))
        other = agent_memory.review_link("app", "user-1", base_url="https://memory.example.com",
                                         secret=SECRET, ttl_seconds=60)
        self.assertNotEqual(link, other, "every link has its own nonce")

    def test_the_key_file_must_be_private(self):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "review.key")
            with open(path, "wb") as file:
                file.write(SECRET.hex().encode() + b"\n")
            os.chmod(path, 0o644)
            with self.assertRaises(MemoryValidationError):
                agent_memory.review_link("app", "u", base_url="http://127.0.0.1:1", key_file=path)
            os.chmod(path, 0o600)
            link = agent_memory.review_link("app", "u", base_url="http://127.0.0.1:1",
                                            key_file=path)
            self.assertIn("/review/open?token=", link)

    def test_bad_input_is_refused(self):
        cases = [
            dict(base_url="https://x", secret=b"short"),
            dict(base_url="https://x/path", secret=SECRET),
            dict(base_url="https://x", secret=SECRET, ttl_seconds=0),
            dict(base_url="https://x", secret=SECRET, ttl_seconds=2 * 86400),
            dict(base_url="https://x"),
        ]
        for case in cases:
            with self.subTest(case=case), self.assertRaises(MemoryValidationError):
                agent_memory.review_link("app", "u", **case)


if __name__ == "__main__":
    unittest.main()
