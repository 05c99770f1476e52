"""Video front end of Embodied-R: decoding by timestamp (``decode``) and key-frame selection
(``selection``). Nothing is imported here, so ``import embodied_r.methods.embodied_r.keyframes`` stays instant."""
